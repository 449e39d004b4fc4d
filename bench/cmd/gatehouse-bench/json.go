package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gatehouse-id/gatehouse/bench/internal/results"
	"github.com/gatehouse-id/gatehouse/bench/internal/suite"
)

// runInfo is what the results file says about the run besides figures.
type runInfo struct {
	start              time.Time
	root               string // the repository's top directory
	commit             string
	dirty              bool
	loadStart, loadEnd string
	modes              []string // the modes run or skipped
}

// runInfo records the start of the run and the commit being measured; a
// tree outside git is reported as such, not refused.
func (b *bench) runInfo(stderr io.Writer) runInfo {
	info := runInfo{start: time.Now(), loadStart: loadAvg(), commit: "unknown"}
	cwd, err := os.Getwd()
	if err != nil {
		cwd = "."
	}
	info.root = repoRoot(cwd)
	if c, dirty, err := gitState(info.root); err != nil {
		fmt.Fprintf(stderr, "gatehouse-bench: commit unknown: %v\n", err)
	} else {
		info.commit, info.dirty = c, dirty
	}
	return info
}

// repoRoot is the top of the git work tree holding dir, or dir outside one.
func repoRoot(dir string) string {
	out, err := exec.Command("git", "-C", dir, "rev-parse", "--show-toplevel").Output()
	if err != nil {
		return dir
	}
	return strings.TrimSpace(string(out))
}

// gitState is the HEAD commit at dir and whether tracked files differ
// from it.
func gitState(dir string) (commit string, dirty bool, err error) {
	head, err := exec.Command("git", "-C", dir, "rev-parse", "HEAD").Output()
	if err != nil {
		return "", false, fmt.Errorf("git rev-parse HEAD: %w", err)
	}
	status, err := exec.Command("git", "-C", dir, "status", "--porcelain", "--untracked-files=no").Output()
	if err != nil {
		return "", false, fmt.Errorf("git status: %w", err)
	}
	return strings.TrimSpace(string(head)), strings.TrimSpace(string(status)) != "", nil
}

// resultsPath resolves the -json flag: relative to the repository's root
// (so `go run` from anywhere writes the same file), "" for none.
func resultsPath(flag, root string) string {
	if flag == "" || filepath.IsAbs(flag) {
		return flag
	}
	return filepath.Join(root, flag)
}

// report is the results file of the run: a record per measured scenario
// and mode, and problems naming every scenario a mode did not measure.
func (b *bench) report(modes []modeResult, info runInfo, problems []string) results.Report {
	rep := results.Report{
		Commit: info.commit, Dirty: info.dirty, Date: info.start.UTC().Format(time.RFC3339),
		Machine:     machine(info),
		Concurrency: b.cfg.concurrency, Requests: b.cfg.requests, LoginRequests: b.cfg.loginRequests,
		Floor: b.floorRecords(), Results: []results.Record{}, Problems: append([]string{}, problems...),
	}
	for _, m := range modes {
		for _, r := range m.rows {
			if !r.Available {
				rep.Problems = append(rep.Problems, fmt.Sprintf("%s (%s): %s", r.Scenario, m.name, r.Note))
				continue
			}
			rec := b.record(m, r)
			rec.Targets = targetRecords(b.checks(m.name, r, embeddedRows(modes), byScenario(m.rows)))
			rep.Results = append(rep.Results, rec)
			if r.Result.Errors > 0 {
				rep.Problems = append(rep.Problems, fmt.Sprintf("%s (%s): %d errors, first: %s", r.Scenario, m.name, r.Result.Errors, r.Result.FirstError))
			}
		}
	}
	names := suite.Names
	if b.cfg.scale() {
		// token-es256 reads what token-rs256 reads (see scaleMode).
		names = slices.DeleteFunc(slices.Clone(names), func(n string) bool { return n == "token-es256" })
		rep.SeedSeconds = results.Round(b.seedTime.Seconds())
	}
	for _, miss := range rep.Missing(names, info.modes) {
		rep.Problems = append(rep.Problems, miss+": not measured")
	}
	rep.SetRatios()
	return rep
}

// record is one row of a mode as a results record; for login, its server
// CPU is split into the argon2id check and the rest.
func (b *bench) record(m modeResult, r suite.Row) results.Record {
	res := r.Result
	rec := results.Record{
		Scenario: r.Scenario, Mode: m.name, Algorithm: r.Algorithm,
		Requests: res.Requests, Errors: res.Errors, RPS: results.Round(res.PerSecond()),
		P50MS: results.MS(res.Percentile(50)), P99MS: results.MS(res.Percentile(99)),
		CPUUSPerReq:    results.US(r.CPUPerRequest()),
		CPUUSByProcess: map[string]float64{},
		RSSMBByProcess: map[string]float64{},
	}
	for name, cpu := range r.ProcessCPUPerRequest() {
		rec.CPUUSByProcess[name] = results.US(cpu)
	}
	for name, rss := range r.RSSByProcess {
		rec.RSSMBByProcess[name] = results.MB(rss)
	}
	if m.library != "" {
		rec.SigningLibrary = &results.Library{Library: m.library, Version: m.version}
	}
	if b.cfg.scale() {
		rows, users := m.tokens, m.users
		rec.Rows, rec.Users = &rows, &users
	}
	if hash, _ := b.loginHash(r); r.Kind.IsLogin() && hash > 0 {
		h := results.US(hash)
		other := results.Round(rec.CPUUSPerReq - h) // so the two add up exactly
		rec.HashUSPerReq, rec.OtherUSPerReq = &h, &other
	}
	return rec
}

// floorRecords are the floor's operations with their mean cost.
func (b *bench) floorRecords() []results.Floor {
	out := []results.Floor{}
	for _, c := range b.floor {
		out = append(out, results.Floor{Operation: c.Op.Alg, Library: c.Op.Library, Detail: c.Name, USPerOp: results.US(b.cost(c.Op))})
	}
	if b.httpCost > 0 {
		out = append(out, results.Floor{Operation: "HTTP server", Library: "go",
			Detail: "bare net/http server, GET, server CPU per request (same load as the scenarios)", USPerOp: results.US(b.httpCost)})
	}
	if b.proxyCost > 0 {
		out = append(out, results.Floor{Operation: "reverse proxy", Library: "go",
			Detail: "bare net/http/httputil.ReverseProxy before a bare server, POST, proxy CPU per request", USPerOp: results.US(b.proxyCost)})
	}
	return out
}

// machine describes this machine from /proc; what cannot be read is left
// out.
func machine(info runInfo) results.Machine {
	m := results.Machine{
		CPUs: runtime.NumCPU(), OS: runtime.GOOS, Arch: runtime.GOARCH, Go: runtime.Version(),
		LoadAvgStart: info.loadStart, LoadAvgEnd: info.loadEnd,
	}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		m.CPUModel = procField(string(b), "model name")
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		if kb, err := strconv.ParseInt(strings.TrimSuffix(procField(string(b), "MemTotal"), " kB"), 10, 64); err == nil {
			m.MemoryMB = kb / 1024
		}
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(b))
	}
	return m
}

// procField is the value of the first "key: value" line of a /proc file
// such as cpuinfo or meminfo, or "".
func procField(text, key string) string {
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if ok && strings.TrimSpace(k) == key {
			return strings.TrimSpace(v)
		}
	}
	return ""
}
