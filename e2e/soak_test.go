package e2e

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gatehouse-id/gatehouse/pkg/testutil"
)

// soakTables are the tables that grow with traffic (README, "Data
// retention"), by schema.
var soakTables = []string{
	"tokens.access_tokens", "tokens.refresh_tokens", "tokens.auth_codes", "tokens.revoked_tokens", "tokens.assertion_jtis",
	"authn.auth_requests", "authn.sessions", "authn.user_agents", "directory.login_failures",
}

// TestSoak churns tokens on PostgreSQL and Redis for GATEHOUSE_SOAK (a
// duration; opt-in, e.g. GATEHOUSE_SOAK=1h) with lifetimes scaled down
// to minutes, sampling the size of every table that grows with traffic:
// once lifetimes have passed, sizes must stay flat (pruning keeps up).
func TestSoak(t *testing.T) {
	dur, err := time.ParseDuration(os.Getenv("GATEHOUSE_SOAK"))
	if err != nil || dur < 3*time.Minute {
		t.Skip("soak test: set GATEHOUSE_SOAK to a duration of at least 3m (e.g. 1h)")
	}
	dbURL := testutil.PostgresDatabase(t)
	e := afStartEnv(t, map[string]string{
		"GATEHOUSE_DATABASE_URL": dbURL, "GATEHOUSE_REDIS_URL": testutil.RedisURL(t),
		"GATEHOUSE_ACCESS_TOKEN_LIFETIME": "30s", "GATEHOUSE_ID_TOKEN_LIFETIME": "30s",
		"GATEHOUSE_REFRESH_TOKEN_IDLE_LIFETIME": "60s", "GATEHOUSE_REFRESH_TOKEN_ABSOLUTE_LIFETIME": "90s",
		"GATEHOUSE_AUTH_CODE_LIFETIME": "10s", "GATEHOUSE_SESSION_IDLE_LIFETIME": "30s", "GATEHOUSE_SESSION_ABSOLUTE_LIFETIME": "60s",
		"GATEHOUSE_PRUNE_INTERVAL": "20s", "GATEHOUSE_RATE_LIMIT": "0", "GATEHOUSE_SESSION_RETENTION": "60s",
		"GATEHOUSE_MASTER_KEY": base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{3}, 32)),
	})
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

	start := time.Now()
	warm := dur / 3
	every := dur / 12
	peakWarm, peakLate := map[string]int{}, map[string]int{}
	next, ops := start.Add(every), 0
	for i := 0; time.Since(start) < dur; i++ {
		c := browser(t, e.base)
		it := e.signIn(c, "alice", afPassword, fmt.Sprintf("soak%d", i))
		_ = it
		status, tok := postForm(t, e.base+"/oauth/v2/token", cc)
		if status != 200 {
			t.Fatalf("client_credentials #%d: %d %v", i, status, tok)
		}
		rv := url.Values{"token": {str(tok["access_token"])}, "client_id": cc["client_id"], "client_secret": cc["client_secret"]}
		if status, body := postForm(t, e.base+"/oauth/v2/revoke", rv); status != 200 {
			t.Fatalf("revoke #%d: %d %v", i, status, body)
		}
		ops += 3
		if now := time.Now(); now.After(next) {
			next = now.Add(every)
			s := sizes()
			var parts []string
			for _, tb := range soakTables {
				parts = append(parts, fmt.Sprintf("%s=%d", strings.SplitN(tb, ".", 2)[1], s[tb]))
				peak := peakLate
				if now.Sub(start) < 2*warm {
					peak = peakWarm
				}
				if now.Sub(start) >= warm && s[tb] > peak[tb] {
					peak[tb] = s[tb]
				}
			}
			t.Logf("t=%v ops=%d %s", now.Sub(start).Round(time.Second), ops, strings.Join(parts, " "))
		}
	}
	// Flat: the last third never grows past the middle third's peak by
	// more than the churn of one prune interval.
	for _, tb := range soakTables {
		if late, mid := peakLate[tb], peakWarm[tb]; late > mid+mid/2+50 {
			t.Errorf("%s grew: peak %d in the last third, %d in the middle third", tb, late, mid)
		}
	}
}
