package suite

import (
	"bytes"
	"context"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
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
		CPU: func(context.Context) (map[string]time.Duration, error) {
			cpu, err := procstat.CPUTime(pid)
			return map[string]time.Duration{"edge": cpu}, err
		},
		RSS: func(context.Context) (map[string]int64, error) {
			rss, err := procstat.RSS(pid)
			return map[string]int64{"edge": rss}, err
		},
	}
}

// TestScenariosAgainstEmbeddedServer runs every scenario of the tool for a
// handful of requests and checks each one really succeeded: a token of the
// configured kind and algorithm, an active introspection answer (or the
// endpoint reported as not available), a non-empty key set, and logins
// that end with an ID token.
func TestScenariosAgainstEmbeddedServer(t *testing.T) {
	const requests, warmup, conc = 12, 3, 2
	for _, c := range []struct {
		alg   string
		kinds []Kind
	}{
		{"RS256", []Kind{TokenJWT, TokenOpaque, IntrospectJWT, IntrospectOpaque, Keys, Login, DevicePoll, PAR, TokenDPoP, IntrospectDPoP}},
		{"ES256", []Kind{TokenJWT}},
	} {
		t.Run(c.alg, func(t *testing.T) {
			target := startEmbedded(t, c.alg)
			client := load.NewClient(conc)
			ctx := context.Background()
			f, err := Prepare(ctx, client, target, conc)
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
					if !strings.HasPrefix(string(r.Kind), "introspect-") || r.Note != "not available: POST /oauth/v2/introspect answered 404" {
						t.Errorf("%s: not available (%s)", r.Scenario, r.Note)
					}
					continue
				}
				status := map[Kind]int{DevicePoll: 400, PAR: 201}[r.Kind] // pending devices; created request URIs
				if status == 0 {
					status = 200
				}
				if r.Result.Requests != requests || r.Result.Errors != 0 || r.Result.Statuses[status] != requests {
					t.Errorf("%s: %d requests, %d errors (%s), statuses %v; want %d successful",
						r.Scenario, r.Result.Requests, r.Result.Errors, r.Result.FirstError, r.Result.Statuses, requests)
				}
				if !r.CPUKnown || len(r.Result.Latencies) != requests || len(r.CPUByProcess) != 1 || r.RSSByProcess["edge"] <= 0 {
					t.Errorf("%s: CPU known %v (%v), RSS %v, %d latencies; want edge's CPU and RSS and %d latencies",
						r.Scenario, r.CPUKnown, r.CPUByProcess, r.RSSByProcess, len(r.Result.Latencies), requests)
				}
				if !slices.Contains(Names, r.Scenario) || r.Algorithm != c.alg {
					t.Errorf("row %q (%s) is not a stable scenario name on %s", r.Scenario, r.Algorithm, c.alg)
				}
			}
			if want := "token-" + strings.ToLower(c.alg); rows[0].Scenario != want {
				t.Errorf("first scenario is %q; want %q", rows[0].Scenario, want)
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
	f, err := Prepare(ctx, client, target, 1)
	if err != nil {
		t.Fatalf("Prepare: %v", err)
	}
	f.JWTClient.Secret = "wrong"
	rows, err := Run(ctx, target, f, []Kind{TokenJWT}, Options{Client: client, Requests: 5, Concurrency: 1})
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

// TestWrongPasswordFailsLogin: a login that does not end with tokens fails
// the scenario; it is never measured.
func TestWrongPasswordFailsLogin(t *testing.T) {
	target := startEmbedded(t, "RS256")
	client := load.NewClient(1)
	ctx := context.Background()
	f, err := Prepare(ctx, client, target, 1)
	if err != nil {
		t.Fatalf("Prepare: %v", err)
	}
	f.Users[0].Password = "Wrong-Passw0rd!"
	rows, err := Run(ctx, target, f, []Kind{Login}, Options{Client: client, Requests: 5, Concurrency: 1})
	if err == nil || !strings.Contains(err.Error(), "login: first login: after the password") || len(rows) != 0 {
		t.Fatalf("Run = %d rows, %v; want no row and the failed first login", len(rows), err)
	}
}

func TestNames(t *testing.T) {
	got := []string{Name(TokenJWT, "RS256"), Name(TokenJWT, "ES256"), Name(TokenOpaque, "RS256"),
		Name(IntrospectJWT, "RS256"), Name(IntrospectOpaque, "RS256"), Name(Keys, "ES256"), Name(Login, "RS256"), Name(LoginTOTP, "RS256"),
		Name(DevicePoll, "RS256"), Name(PAR, "RS256"), Name(TokenDPoP, "RS256"), Name(IntrospectDPoP, "RS256")}
	if !slices.Equal(got, Names) {
		t.Fatalf("names %q; want %q", got, Names)
	}
}

func TestLoginHasItsOwnSize(t *testing.T) {
	o := Options{Warmup: 500, Requests: 5000, LoginRequests: 300}
	if w, n := o.size(Keys); w != 500 || n != 5000 {
		t.Errorf("size(keys) = %d, %d; want 500, 5000", w, n)
	}
	if w, n := o.size(Login); w != 30 || n != 300 {
		t.Errorf("size(login) = %d, %d; want 30, 300", w, n)
	}
	if w, n := (Options{Warmup: 0, Requests: 7}).size(Login); w != 0 || n != 7 {
		t.Errorf("size(login) without LoginRequests = %d, %d; want 0, 7", w, n)
	}
}

func TestCPUDeltaSumsEveryProcess(t *testing.T) {
	ms := time.Millisecond
	before := map[string]time.Duration{"edge": 100 * ms, "tokens": 50 * ms, "postgres": 4000 * ms, "redis": 7 * ms}
	after := map[string]time.Duration{"edge": 130 * ms, "tokens": 90 * ms, "postgres": 4025 * ms, "redis": 8 * ms}
	by, total, err := cpuDelta(before, after)
	if err != nil {
		t.Fatal(err)
	}
	if total != 96*ms || by["edge"] != 30*ms || by["tokens"] != 40*ms || by["postgres"] != 25*ms || by["redis"] != ms {
		t.Fatalf("cpuDelta = %v, total %v; want edge 30ms tokens 40ms postgres 25ms redis 1ms, total 96ms", by, total)
	}
	r := Row{CPU: total, CPUByProcess: by}
	r.Result.Requests = 4
	if r.CPUPerRequest() != 24*ms || r.ProcessCPUPerRequest()["postgres"] != 6250*time.Microsecond {
		t.Fatalf("per request: %v total, %v by process", r.CPUPerRequest(), r.ProcessCPUPerRequest())
	}
	for _, bad := range []map[string]time.Duration{
		{"edge": 130 * ms, "tokens": 90 * ms, "postgres": 4025 * ms},
		{"edge": 130 * ms, "tokens": 90 * ms, "postgres": 4025 * ms, "authn": ms},
	} {
		if _, _, err := cpuDelta(before, bad); err == nil {
			t.Errorf("cpuDelta(%v) succeeded; want an error for a process that came or went", bad)
		}
	}
}

// TestConcurrentLoginsSucceed: four logins at once all succeed, each with
// its own user; four of one user from one address would have the fourth
// refused by the server's lockout (three attempts in flight are free).
func TestConcurrentLoginsSucceed(t *testing.T) {
	const conc, requests = 4, 16
	target := startEmbedded(t, "RS256")
	client := load.NewClient(conc)
	ctx := context.Background()
	f, err := Prepare(ctx, client, target, conc)
	if err != nil {
		t.Fatalf("Prepare: %v", err)
	}
	rows, err := Run(ctx, target, f, []Kind{Login}, Options{Client: client, Requests: requests, Concurrency: conc})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if r := rows[0].Result; r.Requests != requests || r.Errors != 0 {
		t.Fatalf("%d logins, %d errors (%s); want %d successful", r.Requests, r.Errors, r.FirstError, requests)
	}
}

// TestLoginTOTP signs TOTP users in through the embedded server: password,
// then a code the server has not accepted before, every time.
func TestLoginTOTP(t *testing.T) {
	target := startEmbedded(t, "RS256")
	client := load.NewClient(2)
	ctx := context.Background()
	f, err := Prepare(ctx, client, target, 1)
	if err != nil {
		t.Fatalf("Prepare: %v", err)
	}
	if err := PrepareTOTP(ctx, target, f, 8); err != nil {
		t.Fatalf("PrepareTOTP: %v", err)
	}
	// Login and LoginTOTP together run in alternating rounds: 7 logins
	// each, one a round (fewer than LoginRounds), every round's CPU and
	// hash counted and kept. The hash clock here ticks 1 ms at each
	// reading.
	var readings atomic.Int64
	target.HashCPU = func(context.Context) (time.Duration, error) {
		return time.Duration(readings.Add(1)) * time.Millisecond, nil
	}
	rows, err := Run(ctx, target, f, []Kind{Login, LoginTOTP}, Options{Client: client, Requests: 7, Concurrency: 2})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if len(rows) != 2 || rows[0].Kind != Login || rows[1].Kind != LoginTOTP {
		t.Fatalf("rows %v; want login then login-totp", rows)
	}
	for _, row := range rows {
		r := row.Result
		if r.Errors != 0 || r.Requests != 7 || len(r.Latencies) != 7 || r.Statuses[200] != 7 {
			t.Fatalf("%s: %d requests, %d errors (first %s), statuses %v; want 7 without errors", row.Scenario, r.Requests, r.Errors, r.FirstError, r.Statuses)
		}
		if !row.CPUKnown || row.CPU <= 0 || !row.HashKnown || row.HashCPU != 7*time.Millisecond || row.RSSByProcess["edge"] <= 0 {
			t.Errorf("%s: CPU %v (known %v), hash %v (known %v), RSS %v; want all measured",
				row.Scenario, row.CPU, row.CPUKnown, row.HashCPU, row.HashKnown, row.RSSByProcess)
		}
		var sum Round
		for _, rd := range row.Rounds {
			if rd.Requests != 1 || rd.CPU <= 0 || rd.HashCPU != time.Millisecond {
				t.Errorf("%s: round %+v; want 1 login, its CPU and 1 ms of hash", row.Scenario, rd)
			}
			sum = Round{Requests: sum.Requests + rd.Requests, CPU: sum.CPU + rd.CPU, HashCPU: sum.HashCPU + rd.HashCPU}
		}
		if len(row.Rounds) != min(7, LoginRounds) || sum.CPU != row.CPU || sum.HashCPU != row.HashCPU {
			t.Errorf("%s: %d rounds adding up to %+v; want 7 adding up to the row's CPU %v and hash %v",
				row.Scenario, len(row.Rounds), sum, row.CPU, row.HashCPU)
		}
	}
}
