package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gatehouse-id/gatehouse/bench/internal/floor"
	"github.com/gatehouse-id/gatehouse/bench/internal/launch"
	"github.com/gatehouse-id/gatehouse/bench/internal/load"
	"github.com/gatehouse-id/gatehouse/bench/internal/procstat"
	"github.com/gatehouse-id/gatehouse/bench/internal/report"
	"github.com/gatehouse-id/gatehouse/bench/internal/suite"
)

// plan is which scenarios run on a server started with which signing
// algorithm: a server signs with one algorithm, so ES256 gets its own, and
// the rest run on RS256, the default. Together they cover suite.Names.
var plan = []struct {
	alg   string
	kinds []suite.Kind
}{
	{"ES256", []suite.Kind{suite.TokenJWT}},
	{"RS256", []suite.Kind{suite.TokenJWT, suite.TokenOpaque, suite.IntrospectJWT, suite.IntrospectOpaque, suite.Keys, suite.Login, suite.LoginTOTP,
		suite.DevicePoll, suite.PAR, suite.TokenDPoP, suite.IntrospectDPoP}},
}

// tokenRS256 is the scenario whose embedded target is relative to the
// sign cost.
var tokenRS256 = suite.Name(suite.TokenJWT, "RS256")

type bench struct {
	cfg       config
	out       io.Writer
	work      string
	floor     []floor.Cost  // measured before the servers run
	floorEnd  []floor.Cost  // and after; nil when the run was cut short
	httpCost  time.Duration // server CPU per request of a bare net/http server
	proxyCost time.Duration // proxy CPU per POST of a bare httputil.ReverseProxy
	seedTime  time.Duration // bench-scale: how long seeding took
}

func (b *bench) printFloor() error {
	t := report.Table{
		Title:  "floor: raw signature cost, in-process, CPU per operation (before and after the runs)",
		Header: []string{"operation", "before", "after"},
	}
	for i, c := range b.floor {
		after := "-"
		if i < len(b.floorEnd) {
			after = ms(b.floorEnd[i].PerOp)
		}
		t.Rows = append(t.Rows, []string{c.Name, ms(c.PerOp), after})
	}
	if b.httpCost > 0 {
		t.Rows = append(t.Rows, []string{"bare net/http GET (same load, server CPU/req)", ms(b.httpCost), "-"})
	}
	if b.proxyCost > 0 {
		t.Rows = append(t.Rows, []string{"bare httputil.ReverseProxy POST (same load, proxy CPU/req)", ms(b.proxyCost), "-"})
	}
	return t.Write(b.out)
}

// rs256Sign is the cost of an RS256 sign by library ("go" or "openssl"),
// see cost. The target is relative to Go's (the floor, what Dex
// and Hydra pay too).
func (b *bench) rs256Sign(library string) time.Duration {
	return b.cost(floor.Op{Alg: "RS256 sign", Library: library})
}

// cost is the in-process cost of op: the mean of the measurements before
// and after the runs, or the one made so far; 0 when it was not measured.
func (b *bench) cost(op floor.Op) time.Duration {
	var sum time.Duration
	n := 0
	for _, set := range [][]floor.Cost{b.floor, b.floorEnd} {
		for _, c := range set {
			if c.Op == op {
				sum += c.PerOp
				n++
			}
		}
	}
	if n == 0 {
		return 0
	}
	return sum / time.Duration(n)
}

// signingLibrary reads which library the deployment signs with from the
// gatehouse_tokens_signing_library gauge on its processes' /metrics:
// "openssl" or "go" and the version text, or "" if no process tells.
func signingLibrary(ctx context.Context, d *launch.Deployment) (library, version string) {
	for _, base := range d.Bases() {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/metrics", nil)
		if err != nil {
			continue
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			continue
		}
		body, _ := io.ReadAll(io.LimitReader(res.Body, 4<<20))
		res.Body.Close()
		if l, v := parseSigningLibrary(string(body)); l != "" {
			return l, v
		}
	}
	return "", ""
}

// hashCPU is the CPU time the deployment's processes have spent in
// password hashes, summed from gatehouse_password_hash_cpu_seconds_total
// on their /metrics; a process that serves none (distributed edge, whose
// public address has no /metrics) counts nothing, and an error is
// returned only when no process tells.
func hashCPU(ctx context.Context, d *launch.Deployment) (time.Duration, error) {
	var sum float64
	told := false
	for _, base := range d.Bases() {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/metrics", nil)
		if err != nil {
			return 0, err
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, err
		}
		body, err := io.ReadAll(io.LimitReader(res.Body, 4<<20))
		res.Body.Close()
		if err != nil {
			return 0, err
		}
		if v, ok := parseHashCPU(string(body)); ok && res.StatusCode == http.StatusOK {
			sum, told = sum+v, true
		}
	}
	if !told {
		return 0, errors.New("no process's /metrics has gatehouse_password_hash_cpu_seconds_total")
	}
	return time.Duration(sum * float64(time.Second)), nil
}

func parseHashCPU(metrics string) (seconds float64, ok bool) {
	for line := range strings.Lines(metrics) {
		rest, found := strings.CutPrefix(line, "gatehouse_password_hash_cpu_seconds_total")
		if !found || (rest != "" && rest[0] != '{' && rest[0] != ' ') {
			continue
		}
		fields := strings.Fields(rest[strings.LastIndexByte(rest, '}')+1:])
		if len(fields) == 0 {
			return 0, false
		}
		v, err := strconv.ParseFloat(fields[0], 64)
		return v, err == nil
	}
	return 0, false
}

var labelRE = regexp.MustCompile(`(\w+)="([^"]*)"`)

func parseSigningLibrary(metrics string) (library, version string) {
	for line := range strings.Lines(metrics) {
		if !strings.HasPrefix(line, "gatehouse_tokens_signing_library{") {
			continue
		}
		for _, m := range labelRE.FindAllStringSubmatch(line, -1) {
			switch m[1] {
			case "library":
				library = m[2]
			case "version":
				version = m[2]
			}
		}
		return library, version
	}
	return "", ""
}

// modeResult is what one mode measured; complete is false when a failure
// or the time limit cut it short.
type modeResult struct {
	name     string
	rows     []suite.Row // in the order of suite.Names
	nprocs   int         // Gatehouse processes
	complete bool
	// library and version are what signed the tokens (see
	// signingLibrary); library is "" when the server did not say.
	library, version string
	// title names the table when it is not the mode alone (bench-scale's
	// two measurements), with users and tokens the database's sizes.
	title         string
	users, tokens int64
}

// mode runs the plan on fresh deployments of one kind; backends nil means
// embedded. Progress goes to log.
func (b *bench) mode(ctx context.Context, name string, backends *launch.Backends, log io.Writer) (modeResult, error) {
	res := modeResult{name: name, nprocs: 1}
	defer func() { sortRows(res.rows) }()
	for _, p := range plan {
		kinds := b.selected(p.alg, p.kinds)
		if len(kinds) == 0 {
			continue
		}
		fmt.Fprintf(log, "gatehouse-bench: %s, %s: starting\n", name, p.alg)
		d, err := b.start(ctx, name, p.alg, backends)
		if err != nil {
			return res, err
		}
		res.nprocs = len(d.PIDs())
		if res.library == "" {
			res.library, res.version = signingLibrary(ctx, d)
		}
		got, err := b.measure(ctx, d, p.alg, kinds)
		res.rows = append(res.rows, got...)
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		if serr := d.Stop(sctx); serr != nil {
			err = errors.Join(err, fmt.Errorf("stop %s: %w", p.alg, serr))
		}
		cancel()
		if err != nil {
			return res, err
		}
	}
	res.complete = true
	return res, nil
}

// selected is kinds less the scenarios -scenarios leaves out.
func (b *bench) selected(alg string, kinds []suite.Kind) []suite.Kind {
	if len(b.cfg.only) == 0 {
		return kinds
	}
	var out []suite.Kind
	for _, k := range kinds {
		if slices.Contains(b.cfg.only, suite.Name(k, alg)) {
			out = append(out, k)
		}
	}
	return out
}

// start runs a fresh deployment signing with alg.
func (b *bench) start(ctx context.Context, mode, alg string, backends *launch.Backends) (*launch.Deployment, error) {
	dir := filepath.Join(b.work, mode+"-"+alg)
	if err := os.Mkdir(dir, 0o700); err != nil {
		return nil, err
	}
	o := launch.Options{BinDir: b.cfg.bin, WorkDir: dir, Algorithm: alg, StartTimeout: 90 * time.Second}
	var (
		d   *launch.Deployment
		err error
	)
	if backends == nil {
		d, err = launch.StartEmbedded(ctx, o)
	} else {
		d, err = launch.StartDistributed(ctx, o, *backends)
	}
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", alg, err)
	}
	return d, nil
}

// sortRows puts rows in the order of suite.Names, whatever server
// measured them.
func sortRows(rows []suite.Row) {
	slices.SortStableFunc(rows, func(a, b suite.Row) int {
		return cmp.Compare(nameIndex(a.Scenario), nameIndex(b.Scenario))
	})
}

func nameIndex(name string) int {
	if i := slices.Index(suite.Names, name); i >= 0 {
		return i
	}
	return len(suite.Names)
}

// print writes the floor, then one table per mode (and, for a mode of
// several processes, their CPU per request).
func (b *bench) print(modes []modeResult, skipped string) error {
	if err := b.printFloor(); err != nil {
		return err
	}
	for _, r := range modes {
		if len(r.rows) == 0 {
			continue
		}
		name := r.name
		if r.title != "" {
			name = r.title
		}
		if !r.complete {
			name += ", incomplete"
		}
		if err := b.table(name, r, embeddedRows(modes)).Write(b.out); err != nil {
			return err
		}
		if t, ok := processTable(name, r.rows); ok {
			if err := t.Write(b.out); err != nil {
				return err
			}
		}
	}
	if skipped != "" {
		if _, err := fmt.Fprintf(b.out, "%s\n\n", skipped); err != nil {
			return err
		}
	}
	return nil
}

func (b *bench) measure(ctx context.Context, d *launch.Deployment, alg string, kinds []suite.Kind) ([]suite.Row, error) {
	client := load.NewClient(b.cfg.concurrency)
	defer client.CloseIdleConnections()
	t := suite.Target{Base: d.Base, KeyFile: d.KeyFile, Algorithm: alg, CPU: d.CPUByProcess, RSS: d.RSSByProcess,
		HashCPU: func(ctx context.Context) (time.Duration, error) { return hashCPU(ctx, d) }}
	f, err := suite.Prepare(ctx, client, t, b.cfg.concurrency)
	if err != nil {
		return nil, fmt.Errorf("prepare clients (%s): %w", alg, err)
	}
	if slices.Contains(kinds, suite.LoginTOTP) {
		// A user's code is accepted once per 30 s step, and a login uses
		// the current step or the next: about two logins per user during
		// the scenario, warm-up rounds included.
		warm := min(b.cfg.warmup, max(b.cfg.loginRequests/10, 1))
		n := (b.cfg.loginRequests+3*warm)/2 + b.cfg.concurrency
		if err := suite.PrepareTOTP(ctx, t, f, n); err != nil {
			return nil, fmt.Errorf("prepare TOTP users (%s): %w", alg, err)
		}
	}
	return suite.Run(ctx, t, f, kinds, suite.Options{
		Client: client, Warmup: b.cfg.warmup, WarmupTime: b.cfg.warmupTime, Requests: b.cfg.requests, Concurrency: b.cfg.concurrency,
		LoginRequests: b.cfg.loginRequests,
	})
}

// table renders mode's rows with their targets; embedded holds the run's
// embedded rows by scenario, which distributed targets are relative to.
func (b *bench) table(mode string, m modeResult, embedded map[string]suite.Row) report.Table {
	rows, nprocs := m.rows, m.nprocs
	isEmbedded := strings.HasPrefix(mode, "embedded")
	checkMode := "distributed"
	if isEmbedded {
		checkMode = "embedded"
	}
	title := fmt.Sprintf("%s (%d server process%s)", mode, nprocs, plural(nprocs))
	if !isEmbedded {
		title = fmt.Sprintf("%s (%d server process%s, PostgreSQL and Redis)", mode, nprocs, plural(nprocs))
	}
	t := report.Table{
		Title:  title,
		Header: []string{"scenario", "requests", "errors", "req/s", "p50", "p99", "server CPU/req", "targets"},
	}
	sign := b.rs256Sign("go")
	var notes []string
	if m.library != "" {
		notes = append(notes, fmt.Sprintf("the server signs RS256 and ES256 with %s (%s)", m.library, m.version))
	}
	for _, r := range rows {
		if !r.Available {
			row := []string{r.Scenario, "-", "-", "-", "-", "-", "-", "-"}
			t.Rows = append(t.Rows, row)
			notes = append(notes, r.Scenario+": "+r.Note)
			continue
		}
		res := r.Result
		row := []string{r.Scenario, fmt.Sprint(res.Requests), fmt.Sprint(res.Errors),
			fmt.Sprintf("%.0f", res.PerSecond()), ms(res.Percentile(50)), ms(res.Percentile(99)), cpu(r),
			targetCell(b.checks(checkMode, r, embedded, byScenario(rows)))}
		t.Rows = append(t.Rows, row)
		if res.Errors > 0 {
			notes = append(notes, fmt.Sprintf("%s: %d errors, statuses %v, first: %s", r.Scenario, res.Errors, res.Statuses, res.FirstError))
		}
		if r.Scenario == tokenRS256 && r.CPUKnown && sign > 0 {
			notes = append(notes, b.rs256Notes(r.CPUPerRequest(), sign, m.library)...)
		}
		if r.Kind.IsLogin() && r.CPUKnown {
			if hash, measured := b.loginHash(r); hash > 0 {
				how := "as the server counts it"
				if !measured {
					how = "in-process, the server's parameters"
				}
				notes = append(notes, fmt.Sprintf("%s: the argon2id password check (%s) is %s of its %s server CPU; the rest of the flow %s",
					r.Scenario, how, ms(hash), ms(r.CPUPerRequest()), ms(r.CPUPerRequest()-hash)))
			}
		}
	}
	if note := stepNote(byScenario(rows)); note != "" {
		notes = append(notes, note)
	}
	if !isEmbedded && b.proxyCost > 0 {
		notes = append(notes, fmt.Sprintf("edge's CPU per proxied request compares with a bare httputil.ReverseProxy's: %s per POST on this machine (see the floor)", ms(b.proxyCost)))
	}
	notes = append(notes, b.cpuNote(isEmbedded, nprocs))
	t.Notes = notes
	return t
}

// cpuNote says what server CPU is and how precise it is: one tick of each
// process reading, spread over the requests (or the fewer logins).
func (b *bench) cpuNote(embedded bool, nprocs int) string {
	tick := procstat.Resolution()
	per := func(n int) string { return ms(tick / time.Duration(max(n, 1))) }
	precision := fmt.Sprintf("±%s per process per request at %d requests, ±%s per login at %d",
		per(b.cfg.requests), b.cfg.requests, per(b.cfg.loginRequests), b.cfg.loginRequests)
	if embedded {
		return fmt.Sprintf("server CPU = Δ(utime+stime) of the server process from /proc/<pid>/stat in %v ticks: %s", tick, precision)
	}
	return fmt.Sprintf("server CPU = Δ(utime+stime) of the %d server process%s from /proc/<pid>/stat, of every process named postgres "+
		"(with the backends they reaped; the server is shared, so other clients' queries count too) and Redis's INFO used_cpu_user+used_cpu_sys; "+
		"%v ticks: %s", nprocs, plural(nprocs), tick, precision)
}

// processOrder is the column order of the CPU by process.
var processOrder = []string{"edge", "authn", "tokens", "directory", launch.Postgres, launch.Redis}

// processTable is the server CPU per request of each process, for a mode
// of more than one; ok is false otherwise.
func processTable(mode string, rows []suite.Row) (t report.Table, ok bool) {
	seen := map[string]bool{}
	for _, r := range rows {
		for name := range r.CPUByProcess {
			seen[name] = true
		}
	}
	if len(seen) < 2 {
		return t, false
	}
	t = report.Table{Title: mode + ": server CPU per request by process", Header: []string{"scenario"}}
	var names []string
	for _, n := range processOrder {
		if seen[n] {
			names = append(names, n)
		}
	}
	t.Header = append(t.Header, names...)
	for _, r := range rows {
		if !r.CPUKnown {
			continue
		}
		per := r.ProcessCPUPerRequest()
		row := []string{r.Scenario}
		for _, n := range names {
			row = append(row, ms(per[n]))
		}
		t.Rows = append(t.Rows, row)
	}
	return t, true
}

// rs256Notes compare the RS256 JWT scenario's server CPU with the sign
// cost: Go's (the target's reference) and, when the server signs with
// OpenSSL, OpenSSL's, whose difference is the rest of the request's work.
func (b *bench) rs256Notes(cpu, goSign time.Duration, library string) []string {
	notes := []string{fmt.Sprintf("RS256 JWT server CPU / RS256 sign with Go crypto/rsa = %.2f (%s / %s; embedded target ≤ %.2f)",
		float64(cpu)/float64(goSign), ms(cpu), ms(goSign), rs256Factor)}
	own := goSign
	if library == "openssl" {
		if own = b.rs256Sign("openssl"); own == 0 {
			return notes
		}
		notes = append(notes, fmt.Sprintf("RS256 JWT server CPU / RS256 sign with OpenSSL, the server's signer = %.2f (%s / %s)",
			float64(cpu)/float64(own), ms(cpu), ms(own)))
	}
	if b.httpCost > 0 {
		notes = append(notes, fmt.Sprintf("RS256 JWT server CPU − the server's RS256 sign = %s (the request's other work); a bare net/http request costs %s",
			ms(cpu-own), ms(b.httpCost)))
	}
	return notes
}

func cpu(r suite.Row) string {
	if !r.CPUKnown {
		return "n/a"
	}
	return ms(r.CPUPerRequest())
}

// ms formats a duration in milliseconds with microsecond precision.
func ms(d time.Duration) string {
	return fmt.Sprintf("%.3f ms", float64(d)/float64(time.Millisecond))
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "es"
}

// oneLine puts a multi-line error on one line with single spaces.
func oneLine(err error) string {
	return strings.Join(strings.Fields(strings.ReplaceAll(err.Error(), "\n", "; ")), " ")
}

func joinLines(s []string) string { return strings.Join(s, "; ") }

// loginHash is the password hash's CPU per login: as the server counted
// it on its hashing threads (measured true), or else the floor's in-process
// cost, which leaves out what concurrent hashes cost each other (memory
// bandwidth) and so charges it to the rest of the flow.
func (b *bench) loginHash(r suite.Row) (hash time.Duration, measured bool) {
	if r.HashKnown && r.HashCPU > 0 {
		return r.HashPerRequest(), true
	}
	return b.cost(floor.Argon2idVerify), false
}
