package e2e

import (
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"

	"github.com/gatehouse-id/gatehouse/pkg/db"
	"github.com/gatehouse-id/gatehouse/pkg/testutil"
)

// connRedisDB is the Redis database of TestLoadOpensNoNewConnections: its
// connections are told apart from other users' by it (CLIENT LIST's db).
const connRedisDB = 12

// TestLoadOpensNoNewConnections: once warm, steady load makes no process
// dial: not edge to the services, not one service to another, not any of
// them to PostgreSQL or Redis. A pool that keeps too few idle connections
// (database/sql keeps 2 by default) closes and re-dials under load, which
// costs a TCP and TLS handshake, and on PostgreSQL a process fork, per
// request.
func TestLoadOpensNoNewConnections(t *testing.T) {
	ru, err := url.Parse(testutil.RedisURL(t))
	if err != nil {
		t.Fatal(err)
	}
	ru.Path = "/" + strconv.Itoa(connRedisDB)
	// Rate limits stay on (they use Redis) but far above the load.
	d := startDistributedWith(t, ru.String(), "GATEHOUSE_RATE_LIMIT", "1000000", "GATEHOUSE_RATE_BURST", "1000000")
	_, tok := operatorToken(t, d.edge.base, d.directoryData, d.issuer)
	admin := str(tok["access_token"])

	_, mu := restJSON(t, "POST", d.edge.base+"/management/v1/users/machine", admin, map[string]any{"userName": "loader", "name": "loader"})
	_, sec := restJSON(t, "PUT", d.edge.base+"/management/v1/users/"+str(mu["userId"])+"/secret", admin, map[string]any{})
	_, proj := restJSON(t, "POST", d.edge.base+"/management/v1/projects", admin, map[string]any{"name": "Load"})
	_, api := restJSON(t, "POST", d.edge.base+"/management/v1/projects/"+str(proj["id"])+"/apps/api", admin,
		map[string]any{"name": "rs", "authMethodType": "API_AUTH_METHOD_TYPE_BASIC"})
	cc := url.Values{"grant_type": {"client_credentials"}, "client_id": {str(sec["clientId"])}, "client_secret": {str(sec["clientSecret"])},
		"scope": {"openid profile urn:gatehouse:iam:org:project:id:" + str(proj["id"]) + ":aud"}}.Encode()
	apiAuth := "Basic " + base64.StdEncoding.EncodeToString([]byte(url.QueryEscape(str(api["clientId"]))+":"+url.QueryEscape(str(api["clientSecret"]))))

	// One round: a token, its introspection, userinfo, the key set and a
	// management read: every service and both stores.
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 128, IdleConnTimeout: time.Minute}}
	send := func(method, path, auth, form string) (int, string) {
		var body io.Reader
		if form != "" {
			body = strings.NewReader(form)
		}
		req, _ := http.NewRequest(method, d.edge.base+path, body)
		if form != "" {
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		}
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		res, err := client.Do(req)
		if err != nil {
			return 0, err.Error()
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}
	tokenRE := regexp.MustCompile(`"access_token":"([^"]+)"`)
	var failures atomic.Int64
	var firstFailure sync.Once
	round := func() {
		fail := func(what string, status int, body string) {
			failures.Add(1)
			firstFailure.Do(func() { t.Errorf("%s: %d %.300s", what, status, body) })
		}
		status, body := send("POST", "/oauth/v2/token", "", cc)
		m := tokenRE.FindStringSubmatch(body)
		if status != 200 || m == nil {
			fail("token", status, body)
			return
		}
		if status, body := send("POST", "/oauth/v2/introspect", apiAuth, url.Values{"token": {m[1]}}.Encode()); status != 200 || !strings.Contains(body, `"active":true`) {
			fail("introspect", status, body)
		}
		if status, body := send("GET", "/oidc/v1/userinfo", "Bearer "+m[1], ""); status != 200 {
			fail("userinfo", status, body)
		}
		if status, body := send("GET", "/oauth/v2/keys", "", ""); status != 200 {
			fail("keys", status, body)
		}
		if status, body := send("GET", "/management/v1/orgs/me", "Bearer "+admin, ""); status != 200 {
			fail("management", status, body)
		}
	}
	load := func(workers int, dur time.Duration) int64 {
		var n atomic.Int64
		var wg sync.WaitGroup
		end := time.Now().Add(dur)
		for range workers {
			wg.Go(func() {
				for time.Now().Before(end) && failures.Load() == 0 {
					round()
					n.Add(1)
				}
			})
		}
		wg.Wait()
		return n.Load()
	}

	pg, err := pgx.Connect(context.Background(), d.env("")["GATEHOUSE_DATABASE_URL"])
	if err != nil {
		t.Fatal(err)
	}
	defer pg.Close(context.Background())
	ropts, _ := redis.ParseURL(ru.String())
	rdb := redis.NewClient(ropts)
	defer rdb.Close()

	type snapshot struct {
		http     map[string][]string // accepted connections by process
		postgres []string            // backends of Gatehouse: "application_name pid"
		redis    []string            // clients of Gatehouse in connRedisDB: "name id"
	}
	take := func() snapshot {
		s := snapshot{http: map[string][]string{}}
		// The harness runs the four services in this test's process, so
		// their /metrics cannot tell them apart: the kernel's socket table
		// can. A connection shows there (established, or in TIME_WAIT once
		// closed) with the service's port as its local port.
		for _, p := range []*proc{d.edge, d.tokens, d.authn, d.directory} {
			s.http[string(p.role)] = acceptedConns(t, p.base)
		}
		rows, err := pg.Query(context.Background(),
			`SELECT application_name || ' ' || pid FROM pg_stat_activity WHERE datname = current_database() AND application_name LIKE 'gatehouse-%'`)
		if err != nil {
			t.Fatal(err)
		}
		if s.postgres, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil {
			t.Fatal(err)
		}
		list, err := rdb.ClientList(context.Background()).Result()
		if err != nil {
			t.Fatal(err)
		}
		for line := range strings.Lines(list) {
			f := map[string]string{}
			for _, kv := range strings.Fields(line) {
				k, v, _ := strings.Cut(kv, "=")
				f[k] = v
			}
			if strings.HasPrefix(f["name"], "gatehouse-") && f["db"] == strconv.Itoa(connRedisDB) {
				s.redis = append(s.redis, f["name"]+" "+f["id"])
			}
		}
		return s
	}

	// Warm-up at twice the measured concurrency fills every pool past
	// what the measured load needs.
	const concurrency = 16
	load(2*concurrency, 5*time.Second)
	before := take()
	rounds := load(concurrency, 10*time.Second)
	after := take()
	if failures.Load() > 0 {
		t.Fatalf("%d requests failed", failures.Load())
	}
	counts := map[string]int{}
	for p, c := range after.http {
		counts[p] = len(c)
	}
	t.Logf("%d rounds (5 requests each) at concurrency %d; HTTP connections by service %v; PostgreSQL backends %d, Redis clients %d",
		rounds, concurrency, counts, len(after.postgres), len(after.redis))
	if rounds < 100 {
		t.Fatalf("only %d rounds: too little load to tell", rounds)
	}
	newOnes := func(before, after []string) []string {
		var out []string
		for _, x := range after {
			if !slices.Contains(before, x) {
				out = append(out, x)
			}
		}
		return out
	}
	// poolChurn fails the test for a pooled connection that went away
	// under the measured load; a pool that grew only is logged.
	poolChurn := func(what string, before, after []string) {
		grown := newOnes(before, after)
		if gone := newOnes(after, before); len(gone) > 0 {
			t.Errorf("%s connections closed under steady load: %v (then %d new: %v)", what, gone, len(grown), grown)
		} else if len(grown) > 0 {
			t.Logf("%s pools grew under the measured load (no connection was closed): %v", what, grown)
		}
	}
	for p, conns := range after.http {
		if n := newOnes(before.http[p], conns); len(n) > 0 {
			t.Errorf("%s accepted %d new HTTP connections under steady load (%d before); want none", p, len(n), len(before.http[p]))
		}
	}
	// A PostgreSQL pool opens a connection only when all of its open ones
	// are busy, so the warm-up cannot make sure a pool has reached the
	// size a burst of the measured load asks for: a pool that grows
	// towards its bound (GATEHOUSE_DB_MAX_CONNS) is not churn. A backend
	// that went away, or one past the bound, is.
	poolChurn("PostgreSQL", before.postgres, after.postgres)
	perService := map[string]int{}
	for _, b := range after.postgres {
		name, _, _ := strings.Cut(b, " ")
		perService[name]++
	}
	for name, n := range perService {
		if n > db.DefaultMaxConns {
			t.Errorf("%s holds %d PostgreSQL connections; its pool's bound is %d", name, n, db.DefaultMaxConns)
		}
	}
	if len(before.redis) == 0 {
		t.Error("no Redis client named gatehouse-* in CLIENT LIST")
	}
	// A go-redis pool, like a PostgreSQL one, dials only when all of its
	// connections are busy, up to its PoolSize: under a loaded machine a
	// burst of the measured load can need one more than the warm-up did.
	poolChurn("Redis", before.redis, after.redis)
	if len(before.postgres) == 0 {
		t.Error("no PostgreSQL backend with application_name gatehouse-*")
	}
}

// acceptedConns lists the TCP connections accepted on base's port, as
// the kernel's socket table shows them (/proc/net/tcp): "local remote"
// in its hex notation, established or closing.
func acceptedConns(t *testing.T, base string) []string {
	t.Helper()
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	port, _ := strconv.Atoi(u.Port())
	suffix := fmt.Sprintf(":%04X", port)
	raw, err := os.ReadFile("/proc/net/tcp")
	if err != nil {
		t.Skipf("no /proc/net/tcp to count connections: %v", err)
	}
	var out []string
	for line := range strings.Lines(string(raw)) {
		f := strings.Fields(line)
		// sl local_address rem_address st ...; st 0A is LISTEN.
		if len(f) < 4 || f[3] == "0A" || !strings.HasSuffix(f[1], suffix) {
			continue
		}
		out = append(out, f[1]+" "+f[2])
	}
	return out
}
