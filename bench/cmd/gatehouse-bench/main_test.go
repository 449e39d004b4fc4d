package main

import (
	"bytes"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gatehouse-id/gatehouse/bench/internal/floor"
	"github.com/gatehouse-id/gatehouse/bench/internal/load"
	"github.com/gatehouse-id/gatehouse/bench/internal/suite"
)

func TestParseFlags(t *testing.T) {
	c, err := parseFlags(nil, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if !c.embedded || !c.distributed || c.requests != 5000 || c.loginRequests != 2000 || c.warmup != 500 || c.concurrency != 16 ||
		c.timeout != 30*time.Minute || c.jsonPath != "bench/results/latest.json" {
		t.Fatalf("defaults: %+v", c)
	}
	c, err = parseFlags([]string{"-mode", "embedded", "-requests", "10", "-login-requests", "3", "-json", ""}, io.Discard)
	if err != nil || !c.embedded || c.distributed || c.requests != 10 || c.loginRequests != 3 || c.jsonPath != "" {
		t.Fatalf("-mode embedded: %+v %v", c, err)
	}
	for _, bad := range [][]string{{"-mode", "both"}, {"-requests", "0"}, {"-login-requests", "0"}, {"-concurrency", "0"}, {"-timeout", "0s"}, {"extra"}} {
		if _, err := parseFlags(bad, io.Discard); err == nil {
			t.Errorf("parseFlags(%q) succeeded; want an error", bad)
		}
	}
}

// -scenarios runs a subset of the plan and, unless -json is given, writes
// no results file (a partial run must not replace latest.json).
func TestScenariosFlag(t *testing.T) {
	c, err := parseFlags([]string{"-scenarios", "keys,token-es256"}, io.Discard)
	if err != nil || c.jsonPath != "" {
		t.Fatalf("-scenarios: %+v %v; want no results file", c, err)
	}
	b := &bench{cfg: c}
	var got []string
	for _, p := range plan {
		for _, k := range b.selected(p.alg, p.kinds) {
			got = append(got, suite.Name(k, p.alg))
		}
	}
	if strings.Join(got, ",") != "token-es256,keys" {
		t.Fatalf("selected %q; want token-es256 and keys", got)
	}
	if c, err := parseFlags([]string{"-scenarios", "keys", "-json", "x.json"}, io.Discard); err != nil || c.jsonPath != "x.json" {
		t.Fatalf("-scenarios with -json: %+v %v", c, err)
	}
	if _, err := parseFlags([]string{"-scenarios", "keys,nope"}, io.Discard); err == nil {
		t.Fatal("an unknown scenario was accepted")
	}
}

func row(name string, requests int, cpu time.Duration) suite.Row {
	return suite.Row{Scenario: name, Available: true, CPU: cpu, CPUKnown: true, CPUByProcess: map[string]time.Duration{"edge": cpu},
		Result: load.Result{Requests: requests, Elapsed: time.Second, Statuses: map[int]int{200: requests}}}
}

func TestTableTargetsAndRatio(t *testing.T) {
	b := &bench{cfg: config{requests: 100}, httpCost: 30 * time.Microsecond, proxyCost: 120 * time.Microsecond, floor: []floor.Cost{
		{Name: "RS256 sign, Go", Op: floor.Op{Alg: "RS256 sign", Library: "go"}, PerOp: time.Millisecond},
		{Name: "RS256 sign, OpenSSL", Op: floor.Op{Alg: "RS256 sign", Library: "openssl"}, PerOp: 250 * time.Microsecond},
	}}
	rows := []suite.Row{
		row("token-es256", 100, 5*time.Millisecond),   // 0.05 ms ≤ 0.075
		row("token-rs256", 100, 120*time.Millisecond), // 1.2 ms > 1.05 ms
		row("keys", 100, 3*time.Millisecond),          // 0.03 ms ≤ 1.2 × 0.03
		{Scenario: "introspect-jwt", Note: "not available: POST /oauth/v2/introspect answered 404"},
	}
	var out strings.Builder
	if err := b.table("embedded", modeResult{rows: rows, nprocs: 1, library: "go", version: "go1.26.8"}, nil).Write(&out); err != nil {
		t.Fatal(err)
	}
	got := out.String()
	for _, want := range []string{
		"CPU ≤ 0.075 ms met", "CPU (1.05 × Go's RS256 sign) ≤ 1.050 ms MISSED", "CPU (1.2 × bare Go server) ≤ 0.036 ms met",
		"RS256 JWT server CPU / RS256 sign with Go crypto/rsa = 1.20",
		"signs RS256 and ES256 with go (go1.26.8)", "RS256 JWT server CPU − the server's RS256 sign = 0.200 ms",
		"introspect-jwt: not available: POST /oauth/v2/introspect answered 404",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("table lacks %q:\n%s", want, got)
		}
	}

	// Distributed: relative to the same run's embedded rows, with the
	// edge's own share bounded too.
	embedded := map[string]suite.Row{"token-es256": rows[0], "keys": rows[2]}
	dist := []suite.Row{row("token-es256", 100, 16*time.Millisecond), row("keys", 100, 12*time.Millisecond)}
	dist[1].CPUByProcess = map[string]time.Duration{"edge": 7 * time.Millisecond, "tokens": 5 * time.Millisecond}
	var d strings.Builder
	if err := b.table("distributed", modeResult{rows: dist, nprocs: 4}, embedded).Write(&d); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"CPU (1.3 × embedded + 0.1 ms) ≤ 0.165 ms met; edge CPU ≤ 0.080 ms MISSED", // es256: 0.16 ms, all of it edge's here
		"CPU (1.3 × embedded + 0.1 ms) ≤ 0.139 ms met; CPU ≤ 0.130 ms met; edge CPU ≤ 0.080 ms met",
		"a bare httputil.ReverseProxy's: 0.120 ms per POST",
	} {
		if !strings.Contains(d.String(), want) {
			t.Errorf("distributed table lacks %q:\n%s", want, d.String())
		}
	}
	if strings.Contains(got, "ReverseProxy") {
		t.Errorf("embedded table compares with a proxy it does not have:\n%s", got)
	}
	if strings.Contains(d.String(), "1.05 × Go") {
		t.Errorf("distributed table shows embedded targets:\n%s", d.String())
	}
}

// The login's budgets: its CPU besides the hash, and every process's RSS.
func TestLoginTargets(t *testing.T) {
	b := &bench{}
	r := row("login", 10, 250*time.Millisecond) // 25 ms a login
	r.Kind, r.HashKnown, r.HashCPU = suite.Login, true, 200*time.Millisecond
	r.RSSByProcess = map[string]int64{"directory": 160 << 20, "edge": 60 << 20}
	got := targetCell(b.checks("distributed", r, nil, nil))
	want := "CPU besides the hash ≤ 3.000 ms MISSED; directory RSS ≤ 150 MB MISSED; edge RSS ≤ 150 MB met"
	if got != want {
		t.Fatalf("login targets = %q; want %q", got, want)
	}
	recs := targetRecords(b.checks("distributed", r, nil, nil))
	if len(recs) != 3 || recs[0].Value != 5000 || recs[0].Limit != 3000 || recs[0].Met || recs[2].Unit != "MB" || !recs[2].Met {
		t.Fatalf("target records = %+v", recs)
	}
}

// login-totp's budget: its CPU besides the hash within 1.15 × login's of
// the same mode, each first divided by its own hash CPU; with the floor's
// hash (a server that counts none), the rests alone.
func TestLoginTOTPTarget(t *testing.T) {
	t.Parallel()
	b := &bench{floor: []floor.Cost{{Name: "argon2id", Op: floor.Argon2idVerify, PerOp: 20 * time.Millisecond}}}
	login := row("login", 10, 250*time.Millisecond) // 25 ms, 5 ms besides the hash
	login.Kind, login.HashKnown, login.HashCPU = suite.Login, true, 200*time.Millisecond
	// 27.6 ms: 22 ms hash (10% dearer: a slower machine), 5.6 ms rest,
	// which is 5.6/22 × 20 = 5.09 ms at login's hash speed.
	totp := row("login-totp", 10, 276*time.Millisecond)
	totp.Kind, totp.HashKnown, totp.HashCPU = suite.LoginTOTP, true, 220*time.Millisecond
	recs := targetRecords(b.checks("embedded", totp, nil, byScenario([]suite.Row{login, totp})))
	if len(recs) != 1 || recs[0].Name != "CPU besides the hash, at login's hash speed (1.15 × login's)" ||
		recs[0].Limit != 5750 || math.Abs(recs[0].Value-5090.9) > 0.1 || !recs[0].Met {
		t.Fatalf("login-totp targets = %+v; want 5.09 ms against 5.75 ms, met", recs)
	}
	// The same rest at the same hash as login's misses.
	totp.CPU, totp.HashCPU = 258*time.Millisecond, 200*time.Millisecond
	recs = targetRecords(b.checks("embedded", totp, nil, byScenario([]suite.Row{login, totp})))
	if len(recs) != 1 || recs[0].Limit != 5750 || math.Abs(recs[0].Value-5800) > 0.1 || recs[0].Met {
		t.Fatalf("login-totp targets = %+v; want 5.8 ms against 5.75 ms, missed", recs)
	}
	// No hash counted by the server: the floor's, and the rests alone.
	login.HashKnown, login.HashCPU, totp.HashKnown, totp.HashCPU = false, 0, false, 0
	recs = targetRecords(b.checks("embedded", totp, nil, byScenario([]suite.Row{login, totp})))
	if len(recs) != 1 || recs[0].Name != "CPU besides the hash (1.15 × login's)" || recs[0].Limit != 5750 || recs[0].Value != 5800 || recs[0].Met {
		t.Fatalf("login-totp targets without counted hashes = %+v; want 5.8 ms against 5.75 ms, missed", recs)
	}
	if recs := b.checks("embedded", totp, nil, nil); len(recs) != 0 {
		t.Fatalf("login-totp without a login row: %v; want no target", recs)
	}
}

// TestStepNote: the target's figure, normalized by each scenario's hash,
// and the rests alone; nothing without both hashes counted by the server.
func TestStepNote(t *testing.T) {
	t.Parallel()
	login := row("login", 10, 250*time.Millisecond) // 25 ms: 20 ms hash, 5 ms rest
	login.Kind, login.HashKnown, login.HashCPU = suite.Login, true, 200*time.Millisecond
	totp := row("login-totp", 10, 280*time.Millisecond) // 28 ms: 22 ms hash (10% dearer), 6 ms rest
	totp.Kind, totp.HashKnown, totp.HashCPU = suite.LoginTOTP, true, 220*time.Millisecond
	got := stepNote(byScenario([]suite.Row{login, totp}))
	for _, want := range []string{"own hash CPU (the target's figure): 1.091;", "the rests alone: 1.200", "login-totp 1.100 × login's"} {
		if !strings.Contains(got, want) {
			t.Errorf("stepNote = %q; want %q in it", got, want)
		}
	}
	if strings.Contains(got, "95%") {
		t.Errorf("stepNote = %q; want no interval without rounds", got)
	}
	unknown := totp
	unknown.HashKnown = false
	for name, rows := range map[string][]suite.Row{"no login": {totp}, "no login-totp": {login}, "hash not counted": {login, unknown}} {
		if got := stepNote(byScenario(rows)); got != "" {
			t.Errorf("%s: stepNote = %q; want none", name, got)
		}
	}
}

// TestStepInterval: the estimate from rounds is the ratio of their sums,
// and its interval the jackknife's, computed here by hand for four rounds.
func TestStepInterval(t *testing.T) {
	t.Parallel()
	ms := func(f float64) time.Duration { return time.Duration(f * float64(time.Millisecond)) }
	// Each round: 10 logins; CPU and hash of login, then of login-totp.
	type pair struct{ lc, lh, tc, th float64 }
	rounds := []pair{{250, 200, 276, 220}, {300, 240, 290, 230}, {260, 210, 300, 240}, {240, 190, 250, 195}}
	login := suite.Row{Scenario: "login", Kind: suite.Login, CPUKnown: true, HashKnown: true}
	totp := suite.Row{Scenario: "login-totp", Kind: suite.LoginTOTP, CPUKnown: true, HashKnown: true}
	var sum pair
	for _, r := range rounds {
		login.Rounds = append(login.Rounds, suite.Round{Requests: 10, CPU: ms(r.lc), HashCPU: ms(r.lh)})
		totp.Rounds = append(totp.Rounds, suite.Round{Requests: 10, CPU: ms(r.tc), HashCPU: ms(r.th)})
		sum = pair{sum.lc + r.lc, sum.lh + r.lh, sum.tc + r.tc, sum.th + r.th}
	}
	login.CPU, login.HashCPU, login.Result.Requests = ms(sum.lc), ms(sum.lh), 40
	totp.CPU, totp.HashCPU, totp.Result.Requests = ms(sum.tc), ms(sum.th), 40
	est := func(s pair) float64 { return ((s.tc - s.th) / s.th) / ((s.lc - s.lh) / s.lh) }
	var left []float64
	var mean float64
	for _, r := range rounds {
		v := est(pair{sum.lc - r.lc, sum.lh - r.lh, sum.tc - r.tc, sum.th - r.th})
		left = append(left, v)
		mean += v / 4
	}
	var ss float64
	for _, v := range left {
		ss += (v - mean) * (v - mean)
	}
	half := 3.182 * math.Sqrt(3.0/4.0*ss) // t(0.975, 3 df)
	e, ok := estimateStep(login, totp)
	if !ok || math.Abs(e.Ratio-est(sum)) > 1e-9 || e.Rounds != 4 ||
		math.Abs(e.Lo-(est(sum)-half)) > 1e-9 || math.Abs(e.Hi-(est(sum)+half)) > 1e-9 || half < 0.01 {
		t.Fatalf("estimateStep = %+v, %v; want %.4f ± %.4f over 4 rounds", e, ok, est(sum), half)
	}
	if got := stepNote(byScenario([]suite.Row{login, totp})); !strings.Contains(got, fmt.Sprintf("(95%%: %.3f–%.3f over 4 rounds)", e.Lo, e.Hi)) {
		t.Errorf("stepNote = %q; want the interval", got)
	}
	// Rounds that agree leave no doubt.
	same := login
	same.Rounds = []suite.Round{login.Rounds[0], login.Rounds[0], login.Rounds[0]}
	sameT := totp
	sameT.Rounds = []suite.Round{totp.Rounds[0], totp.Rounds[0], totp.Rounds[0]}
	if e, ok := estimateStep(same, sameT); !ok || e.Hi-e.Lo > 1e-9 || math.Abs(e.Ratio-est(rounds[0])) > 1e-9 {
		t.Fatalf("estimateStep of equal rounds = %+v; want %.4f with no width", e, est(rounds[0]))
	}
	if got, want := studentT975(19), 2.093; got != want {
		t.Errorf("studentT975(19) = %v; want %v", got, want)
	}
	if got := studentT975(100); math.Abs(got-1.984) > 0.002 {
		t.Errorf("studentT975(100) = %v; want 1.984", got)
	}
}

// TestTableOpenSSL: with a server that signs with OpenSSL, the target stays
// relative to Go's sign and the remainder is taken from OpenSSL's.
func TestTableOpenSSL(t *testing.T) {
	b := &bench{cfg: config{requests: 100}, httpCost: 30 * time.Microsecond, floor: []floor.Cost{
		{Name: "RS256 sign, Go", Op: floor.Op{Alg: "RS256 sign", Library: "go"}, PerOp: time.Millisecond},
		{Name: "RS256 sign, OpenSSL", Op: floor.Op{Alg: "RS256 sign", Library: "openssl"}, PerOp: 250 * time.Microsecond},
	}}
	rows := []suite.Row{row("token-rs256", 100, 40*time.Millisecond)} // 0.4 ms
	var out strings.Builder
	if err := b.table("embedded", modeResult{rows: rows, nprocs: 1, library: "openssl", version: "OpenSSL 3.0.19"}, nil).Write(&out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"≤ 1.050 ms met", "with Go crypto/rsa = 0.40", "with OpenSSL, the server's signer = 1.60",
		"RS256 JWT server CPU − the server's RS256 sign = 0.150 ms",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, out.String())
		}
	}
}

func TestParseSigningLibrary(t *testing.T) {
	metrics := "# HELP gatehouse_tokens_signing_library What signs.\n# TYPE gatehouse_tokens_signing_library gauge\n" +
		`gatehouse_tokens_signing_library{library="openssl",otel_scope_name="x",version="OpenSSL 3.0.19 27 Jan 2026"} 1` + "\n"
	if l, v := parseSigningLibrary(metrics); l != "openssl" || v != "OpenSSL 3.0.19 27 Jan 2026" {
		t.Fatalf("got %q %q", l, v)
	}
	if l, _ := parseSigningLibrary("go_goroutines 7\n"); l != "" {
		t.Fatalf("got %q from metrics without the gauge", l)
	}
}

func TestParseScaleFlags(t *testing.T) {
	c, err := parseFlags([]string{"-scale-users", "10", "-scale-tokens", "20"}, io.Discard)
	if err != nil || !c.scale() || c.embedded || !c.distributed || c.jsonPath != "bench/results/scale.json" {
		t.Fatalf("scale defaults: %+v %v", c, err)
	}
	if c, err := parseFlags([]string{"-scale-users", "10", "-json", "x.json"}, io.Discard); err != nil || c.jsonPath != "x.json" {
		t.Fatalf("-json with scale: %+v %v", c, err)
	}
	for _, bad := range [][]string{{"-scale-users", "1", "-mode", "embedded"}, {"-scale-tokens", "-1"}} {
		if _, err := parseFlags(bad, io.Discard); err == nil {
			t.Errorf("parseFlags(%q) succeeded; want an error", bad)
		}
	}
}

// TestScaleComparison: a scenario costing more than 1.2× at scale is a
// problem, and the side-by-side table says which.
func TestScaleComparison(t *testing.T) {
	empty := modeResult{users: 5, tokens: 100, rows: []suite.Row{row("keys", 100, 10*time.Millisecond), row("introspect-opaque", 100, 20*time.Millisecond)}}
	grown := modeResult{users: 1000005, tokens: 10000100, rows: []suite.Row{row("keys", 100, 11*time.Millisecond), row("introspect-opaque", 100, 30*time.Millisecond)}}
	problems := compare(empty, grown)
	if len(problems) != 1 || !strings.HasPrefix(problems[0], "introspect-opaque: 1.50 ×") {
		t.Fatalf("compare = %q; want introspect-opaque alone at 1.50", problems)
	}
	var out strings.Builder
	if err := scaleTable(empty, grown).Write(&out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"5 → 1000005 users", "keys", "1.10", "yes", "1.50", "NO"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("scale table lacks %q:\n%s", want, out.String())
		}
	}
}

func TestParseHashCPU(t *testing.T) {
	metrics := `# HELP gatehouse_password_hash_cpu_seconds_total CPU time of the password hashes.
# TYPE gatehouse_password_hash_cpu_seconds_total counter
gatehouse_password_hash_cpu_seconds_total_other 9
gatehouse_password_hash_cpu_seconds_total{otel_scope_name="x",service_name="gatehouse-directory"} 12.5
`
	if v, ok := parseHashCPU(metrics); !ok || v != 12.5 {
		t.Fatalf("parseHashCPU = %v, %v; want 12.5", v, ok)
	}
	if _, ok := parseHashCPU("go_goroutines 3\n"); ok {
		t.Fatal("parseHashCPU found a value where there is none")
	}
}

// TestProxyFloorForwards: the bare proxy of the floor forwards a POST and
// its body to the bare server and answers with the server's body.
func TestProxyFloorForwards(t *testing.T) {
	free := func() string {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		return ln.Addr().String()
	}
	srv, px := free(), free()
	go serveFloor(srv)
	go serveProxyFloor(px, srv)
	deadline := time.Now().Add(5 * time.Second)
	for {
		res, err := http.Post("http://"+px+"/oauth/v2/introspect", "application/x-www-form-urlencoded", strings.NewReader(floorForm))
		if err == nil {
			body, _ := io.ReadAll(res.Body)
			res.Body.Close()
			if res.StatusCode == http.StatusOK {
				if !bytes.Equal(body, floor.KeySetBody) {
					t.Fatalf("proxy answered %.80s; want the floor body", body)
				}
				for _, kv := range floor.KeySetHeaders {
					if got := res.Header.Get(kv[0]); got != kv[1] {
						t.Fatalf("proxy answered %s: %q; want the floor's %q", kv[0], got, kv[1])
					}
				}
				return
			}
			err = fmt.Errorf("HTTP %d", res.StatusCode)
		}
		if time.Now().After(deadline) {
			t.Fatalf("no answer through the proxy: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
