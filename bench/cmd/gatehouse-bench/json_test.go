package main

import (
	"encoding/json"
	"maps"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gatehouse-id/gatehouse/bench/internal/floor"
	"github.com/gatehouse-id/gatehouse/bench/internal/load"
	"github.com/gatehouse-id/gatehouse/bench/internal/suite"
)

// TestPlanCoversEveryStableName: the servers of the plan measure each
// stable scenario name exactly once, in both modes alike.
func TestPlanCoversEveryStableName(t *testing.T) {
	var got []string
	for _, p := range plan {
		for _, k := range p.kinds {
			got = append(got, suite.Name(k, p.alg))
		}
	}
	slices.SortFunc(got, func(a, b string) int { return nameIndex(a) - nameIndex(b) })
	if !slices.Equal(got, suite.Names) {
		t.Fatalf("the plan measures %q; want each of %q once", got, suite.Names)
	}
	rows := []suite.Row{{Scenario: "login"}, {Scenario: "token-es256"}, {Scenario: "keys"}, {Scenario: "token-rs256"}}
	sortRows(rows)
	if rows[0].Scenario != "token-rs256" || rows[1].Scenario != "token-es256" || rows[3].Scenario != "login" {
		t.Fatalf("sortRows: %v", rows)
	}
}

// measured is a row of a deployment whose processes used cpu each.
func measured(name string, kind suite.Kind, alg string, requests int, cpu map[string]time.Duration) suite.Row {
	r := suite.Row{Scenario: name, Kind: kind, Algorithm: alg, Available: true, CPUKnown: true, CPUByProcess: cpu,
		RSSByProcess: map[string]int64{},
		Result: load.Result{Requests: requests, Elapsed: 2 * time.Second, Statuses: map[int]int{200: requests},
			Latencies: []time.Duration{time.Millisecond, 2 * time.Millisecond, 9 * time.Millisecond}}}
	for name, c := range cpu {
		r.CPU += c
		if name != "postgres" {
			r.RSSByProcess[name] = 48 << 20
		}
	}
	return r
}

// benchForReport has a floor with the argon2id check at 30 ms (before)
// and 32 ms (after): the login's hash cost is their mean.
func benchForReport() *bench {
	argon := func(d time.Duration) []floor.Cost {
		return []floor.Cost{{Name: "argon2id verify (m=19456,t=2,p=1)", Op: floor.Argon2idVerify, PerOp: d}}
	}
	return &bench{cfg: config{requests: 1000, loginRequests: 300, concurrency: 4}, floor: argon(30 * time.Millisecond), floorEnd: argon(32 * time.Millisecond),
		httpCost: 40 * time.Microsecond, proxyCost: 130 * time.Microsecond}
}

func TestReportJSONShape(t *testing.T) {
	ms := time.Millisecond
	dist := map[string]time.Duration{"edge": 100 * ms, "authn": 20 * ms, "tokens": 300 * ms, "directory": 30 * ms, "postgres": 250 * ms, "redis": 10 * ms}
	login := map[string]time.Duration{"edge": 600 * ms, "authn": 900 * ms, "tokens": 300 * ms, "directory": 9600 * ms, "postgres": 1200 * ms, "redis": 0}
	modes := []modeResult{
		{name: "embedded", nprocs: 1, complete: true, library: "openssl", version: "OpenSSL 3.0.19",
			rows: []suite.Row{measured("keys", suite.Keys, "RS256", 1000, map[string]time.Duration{"edge": 40 * ms})}},
		{name: "distributed", nprocs: 4, complete: true, library: "openssl", version: "OpenSSL 3.0.19", rows: []suite.Row{
			measured("token-rs256", suite.TokenJWT, "RS256", 1000, dist),
			measured("login", suite.Login, "RS256", 300, login),
		}},
	}
	info := runInfo{start: time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC), commit: "0123abc", loadStart: "1.00 0.50 0.25",
		modes: []string{"embedded", "distributed"}}
	raw, err := json.Marshal(benchForReport().report(modes, info, nil))
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Commit        string         `json:"commit"`
		Date          string         `json:"date"`
		Machine       map[string]any `json:"machine"`
		Concurrency   int            `json:"concurrency"`
		Requests      int            `json:"requests"`
		LoginRequests int            `json:"login_requests"`
		Floor         []map[string]any
		Results       []map[string]any `json:"results"`
		Problems      []string         `json:"problems"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	if doc.Commit != "0123abc" || doc.Date != "2026-11-30T09:00:00Z" || doc.Machine["cpus"].(float64) < 1 ||
		doc.Concurrency != 4 || doc.Requests != 1000 || doc.LoginRequests != 300 || len(doc.Floor) != 3 || len(doc.Results) != 3 {
		t.Fatalf("document: %s", raw)
	}
	// The bare server's and the bare proxy's costs are floors too.
	if doc.Floor[1]["operation"] != "HTTP server" || doc.Floor[1]["us_per_op"] != 40.0 ||
		doc.Floor[2]["operation"] != "reverse proxy" || doc.Floor[2]["us_per_op"] != 130.0 || doc.Floor[2]["library"] != "go" {
		t.Errorf("floor %v; want the argon2id check, the bare server at 40 µs and the bare proxy at 130 µs", doc.Floor)
	}
	for _, r := range doc.Results {
		for _, k := range []string{"scenario", "mode", "algorithm", "requests", "errors", "rps", "p50_ms", "p99_ms",
			"cpu_us_per_req", "cpu_us_by_process", "rss_mb_by_process", "signing_library"} {
			if _, ok := r[k]; !ok {
				t.Errorf("%v (%v) has no %s", r["scenario"], r["mode"], k)
			}
		}
	}
	tok, lg := doc.Results[1], doc.Results[2]
	byProc := tok["cpu_us_by_process"].(map[string]any)
	if got := slices.Sorted(maps.Keys(byProc)); !slices.Equal(got, []string{"authn", "directory", "edge", "postgres", "redis", "tokens"}) {
		t.Errorf("distributed CPU by process names %v", got)
	}
	var sum float64
	for _, v := range byProc {
		sum += v.(float64)
	}
	// 710 ms over 1000 requests: the backends count in the total.
	if tok["cpu_us_per_req"] != 710.0 || math.Abs(sum-710) > 0.05 || byProc["postgres"] != 250.0 {
		t.Errorf("token-rs256: %v µs per request, by process %v (sum %v); want 710 with postgres 250", tok["cpu_us_per_req"], byProc, sum)
	}
	if _, ok := tok["rss_mb_by_process"].(map[string]any)["postgres"]; ok || tok["rss_mb_by_process"].(map[string]any)["edge"] != 48.0 {
		t.Errorf("token-rs256 RSS %v; want 48 MiB per process, none for postgres", tok["rss_mb_by_process"])
	}
	if _, ok := tok["hash_us_per_req"]; ok {
		t.Error("token-rs256 has hash_us_per_req; only login has")
	}
	// 12.6 s over 300 logins = 42000 µs, of which the argon2id check 31000.
	if lg["cpu_us_per_req"] != 42000.0 || lg["hash_us_per_req"] != 31000.0 || lg["other_us_per_req"] != 11000.0 {
		t.Errorf("login: cpu %v, hash %v, other %v; want 42000 = 31000 + 11000", lg["cpu_us_per_req"], lg["hash_us_per_req"], lg["other_us_per_req"])
	}
	if lg["p50_ms"] != 2.0 || lg["rps"] != 150.0 || lg["signing_library"].(map[string]any)["library"] != "openssl" {
		t.Errorf("login: p50 %v ms, %v/s, library %v", lg["p50_ms"], lg["rps"], lg["signing_library"])
	}
	// One row of embedded's twelve and two of distributed's were
	// measured: the rest are problems.
	if len(doc.Problems) != 21 || !slices.Contains(doc.Problems, "login (embedded): not measured") ||
		!slices.Contains(doc.Problems, "token-es256 (distributed): not measured") {
		t.Errorf("problems %q; want the 21 scenarios not measured", doc.Problems)
	}
}

func TestReportNamesFailures(t *testing.T) {
	r := measured("keys", suite.Keys, "RS256", 10, map[string]time.Duration{"edge": time.Millisecond})
	r.Result.Errors, r.Result.FirstError = 2, "GET /oauth/v2/keys: HTTP 503"
	modes := []modeResult{{name: "embedded", rows: []suite.Row{r, {Scenario: "introspect-jwt", Note: "not available: 404"}}}}
	rep := benchForReport().report(modes, runInfo{modes: []string{"embedded", "distributed"}}, []string{"distributed: skipped — Redis down"})
	for _, want := range []string{"distributed: skipped — Redis down", "keys (embedded): 2 errors, first: GET /oauth/v2/keys: HTTP 503",
		"introspect-jwt (embedded): not available: 404", "login (distributed): not measured"} {
		if !slices.Contains(rep.Problems, want) {
			t.Errorf("problems lack %q: %q", want, rep.Problems)
		}
	}
	if len(rep.Results) != 1 || rep.Results[0].Errors != 2 {
		t.Errorf("results %+v; want the keys record with its errors", rep.Results)
	}
}

func TestResultsPath(t *testing.T) {
	for _, c := range []struct{ flag, want string }{
		{"bench/results/latest.json", "/repo/bench/results/latest.json"},
		{"/tmp/x.json", "/tmp/x.json"},
		{"", ""},
	} {
		if got := resultsPath(c.flag, "/repo"); got != c.want {
			t.Errorf("resultsPath(%q) = %q; want %q", c.flag, got, c.want)
		}
	}
}

func TestProcFieldAndMachine(t *testing.T) {
	cpuinfo := "processor\t: 0\nvendor_id\t: GenuineIntel\nmodel name\t: Intel(R) Xeon(R) CPU @ 2.20GHz\n\nprocessor\t: 1\nmodel name\t: other\n"
	if got := procField(cpuinfo, "model name"); got != "Intel(R) Xeon(R) CPU @ 2.20GHz" {
		t.Errorf("procField(model name) = %q", got)
	}
	if got := procField("MemTotal:        8123456 kB\n", "MemTotal"); got != "8123456 kB" {
		t.Errorf("procField(MemTotal) = %q", got)
	}
	if m := machine(runInfo{}); m.CPUs < 1 || m.MemoryMB <= 0 || m.Kernel == "" || m.Go == "" {
		t.Errorf("machine() = %+v; want CPUs, memory, kernel and Go read", m)
	}
}

func TestProcessTable(t *testing.T) {
	ms := time.Millisecond
	rows := []suite.Row{measured("keys", suite.Keys, "RS256", 100, map[string]time.Duration{
		"redis": ms, "edge": 5 * ms, "postgres": 2 * ms, "tokens": 3 * ms, "authn": 0, "directory": 0})}
	tab, ok := processTable("distributed", rows)
	if !ok {
		t.Fatal("no table for a deployment of six processes")
	}
	var out strings.Builder
	if err := tab.Write(&out); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(out.String(), "\n")
	if len(lines) < 4 || strings.Join(strings.Fields(lines[1]), " ") != "scenario edge authn tokens directory postgres redis" ||
		strings.Join(strings.Fields(lines[3]), " ") != "keys 0.050 ms 0.000 ms 0.030 ms 0.000 ms 0.020 ms 0.010 ms" {
		t.Errorf("table:\n%s", out.String())
	}
	if _, ok := processTable("embedded", []suite.Row{measured("keys", suite.Keys, "RS256", 1, map[string]time.Duration{"edge": ms})}); ok {
		t.Error("a table for one process")
	}
}
