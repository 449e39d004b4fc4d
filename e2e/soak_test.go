package e2e

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"github.com/jackc/pgx/v5"
	"golang.org/x/oauth2"

	"github.com/gatehouse-id/gatehouse/pkg/testutil"
)

// soakTables are the tables that grow with traffic (README, "Data
// retention"), by schema.
var soakTables = []string{
	"tokens.access_tokens", "tokens.refresh_tokens", "tokens.auth_codes", "tokens.revoked_tokens", "tokens.assertion_jtis",
	"authn.auth_requests", "authn.sessions", "authn.user_agents", "directory.login_failures",
}

// TestSoak churns tokens in the distributed mode (four processes on
// PostgreSQL and Redis) for GATEHOUSE_SOAK (a duration; opt-in, e.g.
// GATEHOUSE_SOAK=1h) with lifetimes scaled down
// to minutes, sampling the size of every table that grows with traffic:
// once lifetimes have passed, every table holds no more rows than the
// requests of the last few minutes made (pruning keeps up; nothing leaks,
// whatever the throughput).
func TestSoak(t *testing.T) {
	dur, err := time.ParseDuration(os.Getenv("GATEHOUSE_SOAK"))
	if err != nil || dur < 3*time.Minute {
		t.Skip("soak test: set GATEHOUSE_SOAK to a duration of at least 3m (e.g. 1h)")
	}
	d := startDistributedWith(t, testutil.RedisURL(t),
		"GATEHOUSE_ACCESS_TOKEN_LIFETIME", "30s", "GATEHOUSE_ID_TOKEN_LIFETIME", "30s",
		"GATEHOUSE_REFRESH_TOKEN_IDLE_LIFETIME", "60s", "GATEHOUSE_REFRESH_TOKEN_ABSOLUTE_LIFETIME", "90s",
		"GATEHOUSE_AUTH_CODE_LIFETIME", "10s", "GATEHOUSE_SESSION_IDLE_LIFETIME", "30s", "GATEHOUSE_SESSION_ABSOLUTE_LIFETIME", "60s",
		"GATEHOUSE_PRUNE_INTERVAL", "20s", "GATEHOUSE_RATE_LIMIT", "0", "GATEHOUSE_SESSION_RETENTION", "60s")
	dbURL := d.dbURL
	e := afSetup(t, d.edge.base, d.directoryData)
	// A machine user with a secret for client_credentials, introspection
	// and revocation.
	_, mu := restJSON(t, "POST", e.base+"/management/v1/users/machine", e.admin, map[string]any{"userName": "soak", "name": "soak"})
	_, sec := restJSON(t, "PUT", e.base+"/management/v1/users/"+str(mu["userId"])+"/secret", e.admin, map[string]any{})
	cc := url.Values{"grant_type": {"client_credentials"}, "client_id": {str(sec["clientId"])}, "client_secret": {str(sec["clientSecret"])}}

	conn, err := pgx.Connect(context.Background(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	sizes := func() map[string]int {
		out := map[string]int{}
		for _, tb := range soakTables {
			var n int
			if err := conn.QueryRow(context.Background(), "SELECT COUNT(*) FROM "+tb).Scan(&n); err != nil {
				t.Fatalf("count %s: %v", tb, err)
			}
			out[tb] = n
		}
		return out
	}

	// A row lives at most this long after the request that made it: the
	// longest lifetime (sessions: 60 s absolute + 60 s retention) and a
	// prune interval, with slack for a slow round.
	const horizon = 3 * time.Minute
	start := time.Now()
	warm := horizon + 20*time.Second
	every := dur / 12
	if every > time.Minute {
		every = time.Minute
	}
	type mark struct {
		at    time.Time
		iters int
	}
	var marks []mark
	next, samples := start.Add(every), 0
	// Sign-ins ask for offline_access and refresh once, so refresh tokens
	// churn (rotation) beside codes, sessions and access tokens.
	offline := e.web
	offline.Scopes = []string{"openid", "profile", "offline_access"}
	for i := 0; time.Since(start) < dur; i++ {
		marks = append(marks, mark{time.Now(), i})
		c := browser(t, e.base)
		state := fmt.Sprintf("soak%d", i)
		p := e.password(c, afGet(t, c, offline.AuthCodeURL(state, oidc.Nonce("n-"+state))), "alice", afPassword)
		if p.loc == nil || p.loc.Query().Get("code") == "" {
			t.Fatalf("sign-in #%d: %d %v", i, p.status, p.loc)
		}
		signedIn, err := offline.Exchange(e.ctx, p.loc.Query().Get("code"))
		if err != nil || signedIn.RefreshToken == "" {
			t.Fatalf("code exchange #%d: %v (refresh token %t)", i, err, signedIn != nil && signedIn.RefreshToken != "")
		}
		if _, err := offline.TokenSource(e.ctx, &oauth2.Token{RefreshToken: signedIn.RefreshToken}).Token(); err != nil {
			t.Fatalf("refresh #%d: %v", i, err)
		}
		status, tok := postForm(t, e.base+"/oauth/v2/token", cc)
		if status != 200 {
			t.Fatalf("client_credentials #%d: %d %v", i, status, tok)
		}
		rv := url.Values{"token": {str(tok["access_token"])}, "client_id": cc["client_id"], "client_secret": cc["client_secret"]}
		if status, body := postForm(t, e.base+"/oauth/v2/revoke", rv); status != 200 {
			t.Fatalf("revoke #%d: %d %v", i, status, body)
		}
		now := time.Now()
		if now.Before(next) {
			continue
		}
		next = now.Add(every)
		// Iterations within the horizon: each makes at most three rows of
		// a table (access tokens: code, refresh, client_credentials), so a
		// table that holds more than that keeps what it should have dropped.
		recent := 0
		for _, m := range marks {
			if now.Sub(m.at) <= horizon {
				recent++
			}
		}
		s := sizes()
		var parts []string
		for _, tb := range soakTables {
			parts = append(parts, fmt.Sprintf("%s=%d", strings.SplitN(tb, ".", 2)[1], s[tb]))
			if now.Sub(start) > warm && s[tb] > 3*recent+50 {
				t.Errorf("t=%v: %s holds %d rows, more than the %d requests of the last %v can explain",
					now.Sub(start).Round(time.Second), tb, s[tb], recent, horizon)
			}
		}
		samples++
		t.Logf("t=%v iterations=%d (last %v: %d) %s", now.Sub(start).Round(time.Second), i+1, horizon, recent, strings.Join(parts, " "))
	}
	if samples < 3 {
		t.Fatalf("only %d samples", samples)
	}
}
