package e2e

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gatehouse-id/gatehouse/pkg/config"
	"github.com/gatehouse-id/gatehouse/pkg/process"
	"github.com/gatehouse-id/gatehouse/pkg/rpc"
	"github.com/gatehouse-id/gatehouse/pkg/testutil"
	edgesvc "github.com/gatehouse-id/gatehouse/services/edge/service"
	tokenssvc "github.com/gatehouse-id/gatehouse/services/tokens/service"
)

// One path per route kind and service; the route table itself is tested in
// edge's routes package.
var routeProbes = []struct {
	method, path string
	service      string
}{
	{"GET", "/.well-known/openid-configuration", "tokens"},
	{"POST", "/oauth/v2/token", "tokens"},
	{"GET", "/oauth/v2/keys", "tokens"},
	{"GET", "/oidc/v1/userinfo", "tokens"},
	{"POST", "/admin/v1/keys/_rotate", "tokens"},
	{"GET", "/oauth/v2/authorize", "authn"},
	{"GET", "/oidc/v1/end_session", "authn"},
	{"GET", "/ui/login/login", "authn"},
	{"POST", "/management/v1/users/_search", "directory"},
	{"POST", "/gatehouse.management.v1.ManagementService/GetMyOrg", "directory"},
}

func TestEmbeddedServer(t *testing.T) {
	dir := t.TempDir()
	metricsAddr := freeAddr(t)
	edge := startProc(t, config.RoleEdge, map[string]string{"GATEHOUSE_DATA_DIR": dir, "GATEHOUSE_METRICS_ADDR": metricsAddr})

	for _, p := range []string{"/healthz", "/readyz"} {
		if res, body := do(t, "GET", edge.base+p, nil, nil); res.StatusCode != 200 {
			t.Fatalf("GET %s = %d %s; want 200", p, res.StatusCode, body)
		}
	}
	// /metrics is on its own listener, never on the public address.
	if res, body := do(t, "GET", "http://"+metricsAddr+"/metrics", nil, nil); res.StatusCode != 200 || !strings.Contains(body, "go_goroutines") {
		t.Fatalf("GET /metrics on GATEHOUSE_METRICS_ADDR = %d; want Prometheus text", res.StatusCode)
	}
	if res, body := do(t, "GET", edge.base+"/metrics", nil, nil); res.StatusCode != 404 || strings.Contains(body, "go_goroutines") {
		t.Fatalf("GET /metrics on the public address = %d; want 404", res.StatusCode)
	}
	var quiet []string
	for i, rp := range routeProbes {
		id := fmt.Sprintf("embedded-probe-%d", i)
		res, _ := do(t, rp.method, edge.base+rp.path, nil, map[string]string{"X-Request-Id": id})
		if res.Header.Get("X-Request-Id") != id {
			t.Errorf("%s: X-Request-Id echoed %q; want %q", rp.path, res.Header.Get("X-Request-Id"), id)
		}
		if rp.path == "/.well-known/openid-configuration" || rp.path == "/oauth/v2/keys" {
			// Successful GETs of discovery and the key set are logged at
			// debug, below this process's info.
			quiet = append(quiet, id)
			continue
		}
		line := requestLine(edge.log, id)
		if line == nil || line["service"] != rp.service || line["path"] != rp.path {
			t.Errorf("%s %s: access log %v; want service %s", rp.method, rp.path, line, rp.service)
		}
	}
	// The lines of later requests are written: theirs would be too.
	for _, id := range quiet {
		if !noRequestLine(edge.log, id) {
			t.Errorf("request %s (discovery or the key set) logged at info", id)
		}
	}
	for _, p := range []string{"/nope", "/gatehouse.directory.v1.DirectoryService/GetClient", "/gatehouse.tokens.v1.TokenService/Introspect", "/.well-known/oauth-authorization-server"} {
		if res, body := do(t, "POST", edge.base+p, nil, nil); res.StatusCode != 404 || !strings.Contains(body, "not_found") {
			t.Errorf("POST %s = %d %s; want edge's 404", p, res.StatusCode, body)
		}
	}
	// The embedded mode keeps one SQLite file per service and a 0600 master key.
	for _, f := range []string{"authn.db", "tokens.db", "directory.db", "master.key"} {
		fi, err := os.Stat(filepath.Join(dir, f))
		if err != nil {
			t.Fatalf("data dir misses %s: %v", f, err)
		}
		if fi.Mode().Perm()&0o077 != 0 {
			t.Errorf("%s mode %v; want no group/other access", f, fi.Mode().Perm())
		}
	}
	edge.stop(t)
	if !contains(edge.log.String(), `"msg":"shutting down"`, `"msg":"stopped"`) {
		t.Errorf("no graceful shutdown in log:\n%s", edge.log)
	}
}

// A distributed process reads only its own services' variables: another
// service's invalid one does not stop it.
func TestAnotherServicesVariableDoesNotStopAProcess(t *testing.T) {
	t.Parallel()
	env := map[string]string{"GATEHOUSE_DIRECTORY_URL": "http://127.0.0.1:9", "GATEHOUSE_INTERNAL_TOKEN": strings.Repeat("x", 40),
		"GATEHOUSE_DATA_DIR": t.TempDir(), "GATEHOUSE_SESSION_IDLE_LIFETIME": "0s", "GATEHOUSE_RATE_LIMIT_FALLBACK": "closed"}
	var stderr bytes.Buffer
	built := false
	code := process.Run(context.Background(), config.RoleTokens, func(k string) string { return env[k] }, &stderr,
		func(context.Context, process.Env) (process.Component, error) {
			built = true
			return nil, errors.New("stop here")
		}, nil, &tokenssvc.Settings{})
	if code == process.ExitConfig || !built {
		t.Fatalf("exit %d, built %v; the tokens process refused authn's and edge's variables:\n%s", code, built, stderr.String())
	}
	env["GATEHOUSE_SIGNING_ALGORITHM"] = "HS256"
	if code := process.Run(context.Background(), config.RoleTokens, func(k string) string { return env[k] }, &stderr,
		func(context.Context, process.Env) (process.Component, error) { return nil, errors.New("stop here") }, nil,
		&tokenssvc.Settings{}); code != process.ExitConfig {
		t.Fatalf("its own invalid variable: exit %d; want 2", code)
	}
}

func TestBadConfigurationExits2WithOneLine(t *testing.T) {
	dir := t.TempDir()
	cases := map[string]map[string]string{
		"malformed database url": {"GATEHOUSE_DATABASE_URL": "postgres://user:pw@[bad", "GATEHOUSE_MASTER_KEY": base64.StdEncoding.EncodeToString(make([]byte, 32))},
		"short master key":       {"GATEHOUSE_MASTER_KEY": base64.StdEncoding.EncodeToString(make([]byte, 16))},
		"service without urls":   {"GATEHOUSE_INTERNAL_TOKEN": strings.Repeat("x", 40)},
		// Read with the core, before anything starts: the sections of the
		// services the embedded edge runs.
		"embedded services' variables": {"GATEHOUSE_SIGNING_ALGORITHM": "HS256", "GATEHOUSE_SESSION_IDLE_LIFETIME": "0s"},
	}
	for name, env := range cases {
		t.Run(name, func(t *testing.T) {
			env["GATEHOUSE_DATA_DIR"] = filepath.Join(dir, name)
			role := config.RoleEdge
			if name == "service without urls" {
				role = config.RoleAuthn
			}
			var stderr bytes.Buffer
			built := false
			code := process.Run(context.Background(), role, func(k string) string { return env[k] }, &stderr,
				func(context.Context, process.Env) (process.Component, error) {
					built = true
					return nil, fmt.Errorf("must not be reached")
				}, nil, edgesvc.Sections)
			if code != process.ExitConfig {
				t.Fatalf("exit %d; want 2", code)
			}
			if name == "embedded services' variables" && !contains(stderr.String(), "GATEHOUSE_SIGNING_ALGORITHM", "GATEHOUSE_SESSION_IDLE_LIFETIME") {
				t.Fatalf("stderr %q; want both variables named", stderr.String())
			}
			out := strings.TrimSuffix(stderr.String(), "\n")
			if strings.Count(out, "\n") != 0 || !strings.Contains(out, "GATEHOUSE_") {
				t.Fatalf("stderr %q; want one line naming the variable", stderr.String())
			}
			if strings.Contains(out, "pw") {
				t.Fatalf("stderr leaks the password: %q", out)
			}
			if built {
				t.Fatal("process started its component despite bad configuration")
			}
			if _, err := os.Stat(env["GATEHOUSE_DATA_DIR"]); !os.IsNotExist(err) {
				t.Fatalf("bad configuration created the data dir: %v", err)
			}
		})
	}
}

// TestDistributed runs the four processes against PostgreSQL and Redis, as
// make run-distributed does, and checks routing, trace propagation and that
// a stopped service takes down only its own routes.
func TestDistributed(t *testing.T) {
	dbURL := testutil.PostgresDatabase(t)
	redisURL := testutil.RedisURL(t)
	common := func() map[string]string {
		return map[string]string{
			"GATEHOUSE_DATABASE_URL":   dbURL,
			"GATEHOUSE_REDIS_URL":      redisURL,
			"GATEHOUSE_MASTER_KEY":     base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{9}, 32)),
			"GATEHOUSE_INTERNAL_TOKEN": strings.Repeat("t", 40),
			"GATEHOUSE_DATA_DIR":       t.TempDir(),
			"GATEHOUSE_RATE_LIMIT":     "1000",
			"GATEHOUSE_RATE_BURST":     "1000",
			// A service logs each request at debug level (edge at info).
			"GATEHOUSE_LOG_LEVEL": "debug",
		}
	}
	with := func(m map[string]string, kv ...string) map[string]string {
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	// Services need each other's URLs; they are only dialed on use, so a
	// placeholder port is fine for a process started before its peer.
	directory := startProc(t, config.RoleDirectory, with(common(), "GATEHOUSE_TOKENS_URL", "http://127.0.0.1:1"))
	tokens := startProc(t, config.RoleTokens, with(common(), "GATEHOUSE_DIRECTORY_URL", directory.base))
	authn := startProc(t, config.RoleAuthn, with(common(), "GATEHOUSE_DIRECTORY_URL", directory.base, "GATEHOUSE_TOKENS_URL", tokens.base))
	// The test client is edge's trusted proxy, so the client address edge
	// resolves (from X-Forwarded-For) differs from every socket address.
	edge := startProc(t, config.RoleEdge, with(common(), "GATEHOUSE_TRUSTED_PROXIES", "127.0.0.1",
		"GATEHOUSE_AUTHN_URL", authn.base, "GATEHOUSE_TOKENS_URL", tokens.base, "GATEHOUSE_DIRECTORY_URL", directory.base))
	procs := map[string]*proc{"authn": authn, "tokens": tokens, "directory": directory}

	for _, p := range []*proc{directory, tokens, authn, edge} {
		if res, body := do(t, "GET", p.base+"/readyz", nil, nil); res.StatusCode != 200 {
			t.Fatalf("%s /readyz = %d %s", p.role, res.StatusCode, body)
		}
	}
	for i, rp := range routeProbes {
		id := fmt.Sprintf("dist-probe-%d", i)
		// "Connection: X-Real-Ip" asks the hop to drop the header: it must
		// not drop the one edge sets for the service.
		do(t, rp.method, edge.base+rp.path, nil, map[string]string{"X-Request-Id": id,
			"X-Forwarded-For": "198.51.100.7", "X-Real-Ip": "203.0.113.66", "Connection": "X-Real-Ip"})
		edgeLine := requestLine(edge.log, id)
		if edgeLine == nil || edgeLine["service"] != rp.service {
			t.Fatalf("%s: edge access log %v; want service %s", rp.path, edgeLine, rp.service)
		}
		for name, p := range procs {
			if name != rp.service {
				if !noRequestLine(p.log, id) {
					t.Errorf("%s reached %s too", rp.path, name)
				}
				continue
			}
			line := requestLine(p.log, id)
			if line == nil || line["path"] != rp.path {
				t.Fatalf("%s: no access log line in %s (request id %s):\n%s", rp.path, name, id, p.log)
			}
			if line["client"] != "198.51.100.7" {
				t.Errorf("%s: %s took the client for %v; want 198.51.100.7, the address edge resolved", rp.path, name, line["client"])
			}
			// Same trace in edge and in the service: context crossed the proxy.
			if line["trace_id"] == nil || line["trace_id"] != edgeLine["trace_id"] {
				t.Errorf("%s: trace id edge %v, %s %v; want equal", rp.path, edgeLine["trace_id"], name, line["trace_id"])
			}
		}
	}

	// Straight to a service, a forged X-Real-Ip is not believed.
	for name, p := range procs {
		id := "dist-direct-" + name
		do(t, "GET", p.base+"/oauth/v2/keys", nil, map[string]string{"X-Request-Id": id, "X-Real-Ip": "203.0.113.66"})
		if line := requestLine(p.log, id); line == nil || line["client"] != "127.0.0.1" {
			t.Errorf("%s called directly with a forged X-Real-Ip: access log %v; want client 127.0.0.1", name, line)
		}
	}

	// Internal paths are not routed even though a real service is behind.
	if res, _ := do(t, "POST", edge.base+"/gatehouse.tokens.v1.TokenService/Introspect", nil, nil); res.StatusCode != 404 {
		t.Errorf("internal path through edge = %d; want 404", res.StatusCode)
	}

	// Stop tokens: only its routes answer 503, once what edge kept of
	// discovery and the key set (probed above) has lapsed.
	tokens.stop(t)
	time.Sleep(rpc.EdgeCacheMaxAge)
	for _, rp := range routeProbes {
		res, body := do(t, rp.method, edge.base+rp.path, nil, nil)
		if rp.service == "tokens" {
			if res.StatusCode != 503 || res.Header.Get("Retry-After") == "" || !strings.Contains(body, "temporarily_unavailable") {
				t.Errorf("%s with tokens down = %d %q (Retry-After %q); want 503", rp.path, res.StatusCode, body, res.Header.Get("Retry-After"))
			}
		} else if res.StatusCode == 503 {
			t.Errorf("%s (%s) = 503 although only tokens is down", rp.path, rp.service)
		}
	}
	if res, _ := do(t, "GET", edge.base+"/readyz", nil, nil); res.StatusCode != 200 {
		t.Errorf("edge /readyz = %d with one backend down; want 200 (other routes still work)", res.StatusCode)
	}
}
