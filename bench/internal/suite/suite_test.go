package suite

import (
	"bytes"
	"context"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/gatehouse-id/gatehouse/bench/internal/load"
	"github.com/gatehouse-id/gatehouse/bench/internal/procstat"
	"github.com/gatehouse-id/gatehouse/pkg/config"
	"github.com/gatehouse-id/gatehouse/pkg/process"
	edgesvc "github.com/gatehouse-id/gatehouse/services/edge/service"
)

// logBuffer is a goroutine-safe log sink.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// startEmbedded runs the embedded server in this test binary exactly as
// bin/edge runs it, with the environment the benchmark tool sets.
func startEmbedded(t *testing.T, alg string) Target {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	dir := t.TempDir()
	env := map[string]string{
		"GATEHOUSE_ADDR": addr, "GATEHOUSE_ISSUER": "http://" + addr, "GATEHOUSE_DATA_DIR": dir,
		"GATEHOUSE_RATE_LIMIT": "0", "GATEHOUSE_SIGNING_ALGORITHM": alg,
		"GATEHOUSE_ADMIN_PASSWORD": "Bench-Test-Passw0rd!",
	}
	ctx, cancel := context.WithCancel(context.Background())
	log := &logBuffer{}
	ready, done := make(chan string, 1), make(chan int, 1)
	go func() {
		done <- process.Run(ctx, config.RoleEdge, func(k string) string { return env[k] }, log, edgesvc.Build, func(a string) { ready <- a })
	}()
	select {
	case <-ready:
	case code := <-done:
		cancel()
		t.Fatalf("edge exited with %d before listening:\n%s", code, log)
	case <-time.After(60 * time.Second):
		cancel()
		t.Fatalf("edge did not start:\n%s", log)
	}
	t.Cleanup(func() {
		cancel()
		if code := <-done; code != process.ExitOK {
			t.Errorf("edge exited with %d; want 0:\n%s", code, log)
		}
	})
	pid := os.Getpid()
	return Target{
		Base: "http://" + addr, KeyFile: filepath.Join(dir, "bootstrap-admin-key.json"), Algorithm: alg,
		// In-process, "server CPU" is this whole test binary, client included.
		CPU: func() (time.Duration, error) { return procstat.CPUTime(pid) },
	}
}

// TestScenariosAgainstEmbeddedServer runs every scenario of the tool for a
// handful of requests and checks each one really succeeded: a token of the
// configured kind and algorithm, an active introspection answer (or the
// endpoint reported as not available), a non-empty key set.
func TestScenariosAgainstEmbeddedServer(t *testing.T) {
	const requests, warmup, conc = 12, 3, 2
	for _, c := range []struct {
		alg   string
		kinds []Kind
	}{
		{"RS256", []Kind{ClientCredentialsJWT, ClientCredentialsOpaque, Introspection, KeySet}},
		{"ES256", []Kind{ClientCredentialsJWT}},
	} {
		t.Run(c.alg, func(t *testing.T) {
			target := startEmbedded(t, c.alg)
			client := load.NewClient(conc)
			ctx := context.Background()
			f, err := Prepare(ctx, client, target)
			if err != nil {
				t.Fatalf("Prepare: %v", err)
			}
			rows, err := Run(ctx, target, f, c.kinds, Options{Client: client, Warmup: warmup, Requests: requests, Concurrency: conc})
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
			if len(rows) != len(c.kinds) {
				t.Fatalf("got %d rows; want %d", len(rows), len(c.kinds))
			}
			for i, r := range rows {
				if r.Kind != c.kinds[i] {
					t.Errorf("row %d is %s; want %s", i, r.Kind, c.kinds[i])
				}
				if !r.Available {
					if r.Kind != Introspection || r.Note != "not available: POST /oauth/v2/introspect answered 404" {
						t.Errorf("%s: not available (%s)", r.Scenario, r.Note)
					}
					continue
				}
				if r.Result.Requests != requests || r.Result.Errors != 0 || r.Result.Statuses[200] != requests {
					t.Errorf("%s: %d requests, %d errors (%s), statuses %v; want %d successful",
						r.Scenario, r.Result.Requests, r.Result.Errors, r.Result.FirstError, r.Result.Statuses, requests)
				}
				if !r.CPUKnown || len(r.Result.Latencies) != requests {
					t.Errorf("%s: CPU known %v, %d latencies; want a CPU reading and %d latencies", r.Scenario, r.CPUKnown, len(r.Result.Latencies), requests)
				}
			}
			if rows[0].Scenario != "client_credentials JWT "+c.alg {
				t.Errorf("first scenario is %q", rows[0].Scenario)
			}
		})
	}
}

// TestWrongCredentialsAreErrors proves the harness reports failures: a
// client with a wrong secret gets 401s, and every one counts as an error.
func TestWrongCredentialsAreErrors(t *testing.T) {
	target := startEmbedded(t, "RS256")
	client := load.NewClient(1)
	ctx := context.Background()
	f, err := Prepare(ctx, client, target)
	if err != nil {
		t.Fatalf("Prepare: %v", err)
	}
	f.JWTClient.Secret = "wrong"
	rows, err := Run(ctx, target, f, []Kind{ClientCredentialsJWT}, Options{Client: client, Requests: 5, Concurrency: 1})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if r := rows[0].Result; r.Errors != 5 || r.Statuses[401] != 5 {
		t.Fatalf("wrong secret: %d errors, statuses %v; want 5 errors, 5×401", r.Errors, r.Statuses)
	}
}

// TestTokenChecks covers the response checks on shapes the server must
// never send, which the embedded server cannot be made to produce.
func TestTokenChecks(t *testing.T) {
	jwtES := `{"access_token":"eyJhbGciOiJFUzI1NiJ9.e30.c2ln","token_type":"Bearer"}`
	for _, c := range []struct {
		body    string
		wantJWT bool
		alg     string
		ok      bool
	}{
		{jwtES, true, "ES256", true},
		{jwtES, true, "RS256", false},
		{jwtES, false, "", false},
		{`{"access_token":"abc_DEF-123","token_type":"Bearer"}`, false, "", true},
		{`{"access_token":"abc_DEF-123","token_type":"Bearer"}`, true, "RS256", false},
		{`{"access_token":"","token_type":"Bearer"}`, false, "", false},
		{`{"error":"invalid_client"}`, false, "", false},
	} {
		err := checkToken([]byte(c.body), c.wantJWT, c.alg)
		if (err == nil) != c.ok {
			t.Errorf("checkToken(%s, jwt=%v, %s) = %v; want ok=%v", c.body, c.wantJWT, c.alg, err, c.ok)
		}
	}
}
