// Command gatehouse-bench is `make bench`: it starts the built binaries
// (bin/edge embedded; bin/directory, bin/tokens, bin/authn and bin/edge
// distributed on PostgreSQL and Redis), prepares clients through the
// public APIs, and prints per scenario requests/s, p50/p99 latency and
// server CPU per request, next to the in-process RS256/ES256 sign and
// argon2id costs, and writes the same figures as JSON (-json, by default
// bench/results/latest.json). It builds nothing: run `make build` first.
// All traffic stays on 127.0.0.1.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/gatehouse-id/gatehouse/bench/internal/floor"
	"github.com/gatehouse-id/gatehouse/bench/internal/launch"
	"github.com/gatehouse-id/gatehouse/bench/internal/report"
	"github.com/gatehouse-id/gatehouse/bench/internal/suite"
)

func main() {
	if len(os.Args) == 3 && os.Args[1] == floorFlag {
		os.Exit(serveFloor(os.Args[2]))
	}
	if len(os.Args) == 4 && os.Args[1] == proxyFloorFlag {
		os.Exit(serveProxyFloor(os.Args[2], os.Args[3]))
	}
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	cfg, err := parseFlags(args, stderr)
	if err != nil {
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, cfg.timeout)
	defer cancel()
	// Last resort if something ignores the deadline (cleanup gets 30 s):
	// the children die with this process (Pdeathsig).
	watchdog := time.AfterFunc(cfg.timeout+30*time.Second, func() {
		fmt.Fprintf(stderr, "gatehouse-bench: hard stop after %v\n", cfg.timeout+30*time.Second)
		os.Exit(3)
	})
	defer watchdog.Stop()

	work, err := os.MkdirTemp("", "gatehouse-bench-")
	if err != nil {
		fmt.Fprintf(stderr, "gatehouse-bench: %v\n", err)
		return 1
	}
	b := &bench{cfg: cfg, out: stdout, work: work}
	info := b.runInfo(stderr)
	fmt.Fprintf(stdout, "gatehouse-bench: %d requests per scenario (%d logins) after at least %d warm-up requests and %v, concurrency %d, HTTP/1.1 keep-alive to 127.0.0.1\n",
		cfg.requests, cfg.loginRequests, cfg.warmup, cfg.warmupTime, cfg.concurrency)
	fmt.Fprintf(stdout, "%d CPUs, load average (1, 5, 15 min) at the start: %s\n\n", runtime.NumCPU(), info.loadStart)

	// The floor is measured first, while no server competes for the CPU.
	costs, err := floor.Measure(ctx, floor.DefaultBudget)
	if err != nil {
		fmt.Fprintf(stderr, "gatehouse-bench: floor costs: %v\n", err)
		return 1
	}
	b.floor = costs
	if b.httpCost, b.proxyCost, err = b.httpFloors(ctx); err != nil {
		fmt.Fprintf(stderr, "gatehouse-bench: bare HTTP floor: %v\n", err)
		return 1
	}

	// Tables are printed at the end, when the floor has been measured again.
	var (
		modes    []modeResult
		skipped  string
		problems []string // for the results file
		failed   bool
		extra    []report.Table // printed after the modes' tables
	)
	runMode := func(name string, backends *launch.Backends) {
		info.modes = append(info.modes, name)
		r, err := b.mode(ctx, name, backends, stderr)
		modes = append(modes, r)
		if err != nil {
			fmt.Fprintf(stderr, "gatehouse-bench: %s: %v\n", name, err)
			problems = append(problems, name+": incomplete: "+oneLine(err))
			failed = true
		}
	}
	if cfg.embedded {
		runMode("embedded", nil)
	}
	if cfg.distributed && ctx.Err() == nil {
		backends := launch.Backends{PostgresURL: cfg.postgres, RedisURL: cfg.redis}
		if err := backends.Check(ctx); err != nil {
			info.modes = append(info.modes, "distributed")
			skipped = "distributed: skipped — " + oneLine(err)
			problems = append(problems, skipped)
		} else if cfg.scale() {
			info.modes = append(info.modes, "distributed")
			scaled, plans, p, err := b.scaleMode(ctx, backends, stderr)
			modes = append(modes, scaled...)
			problems = append(problems, p...)
			if err != nil {
				fmt.Fprintf(stderr, "gatehouse-bench: scale: %v\n", err)
				problems = append(problems, "scale: incomplete: "+oneLine(err))
				failed = true
			}
			if len(scaled) == 2 {
				extra = append(extra, scaleTable(scaled[0], scaled[1]))
				if path := resultsPath(cfg.jsonPath, info.root); path != "" && len(plans) > 0 {
					if err := writePlans(strings.TrimSuffix(path, ".json")+"-plans.md", plans, scaled[1]); err != nil {
						fmt.Fprintf(stderr, "gatehouse-bench: %v\n", err)
						failed = true
					}
				}
			}
		} else {
			runMode("distributed", &backends)
		}
	}
	// Measured again at the end: on a shared machine the two differ, and
	// the ratio uses their mean.
	if ctx.Err() == nil {
		if end, err := floor.Measure(ctx, floor.DefaultBudget); err == nil {
			b.floorEnd = end
		}
	}
	if err := b.print(modes, skipped); err != nil {
		fmt.Fprintf(stderr, "gatehouse-bench: %v\n", err)
		return 1
	}
	for _, t := range extra {
		if err := t.Write(stdout); err != nil {
			fmt.Fprintf(stderr, "gatehouse-bench: %v\n", err)
			return 1
		}
	}
	for _, p := range problems {
		fmt.Fprintf(stdout, "problem: %s\n", p)
	}
	info.loadEnd = loadAvg()
	fmt.Fprintf(stdout, "load average (1, 5, 15 min) at the end: %s\n", info.loadEnd)
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		fmt.Fprintf(stderr, "gatehouse-bench: stopped at the %v time limit\n", cfg.timeout)
		problems = append(problems, fmt.Sprintf("stopped at the %v time limit", cfg.timeout))
		failed = true
	}
	if path := resultsPath(cfg.jsonPath, info.root); path != "" {
		if err := b.report(modes, info, problems).Write(path); err != nil {
			fmt.Fprintf(stderr, "gatehouse-bench: %v\n", err)
			failed = true
		} else {
			fmt.Fprintf(stdout, "results written to %s\n", path)
		}
	}
	if failed {
		fmt.Fprintf(stderr, "gatehouse-bench: logs kept in %s\n", work)
		return 1
	}
	_ = os.RemoveAll(work)
	return 0
}

type config struct {
	bin                   string
	requests, warmup      int
	loginRequests         int
	warmupTime            time.Duration
	concurrency           int
	timeout               time.Duration
	embedded, distributed bool
	postgres, redis       string
	// jsonPath is where the results file goes, relative to the
	// repository's root; "" writes none.
	jsonPath string
	// scaleUsers and scaleTokens make the run bench-scale's (see
	// scaleMode): the rows seeded between its two measurements.
	scaleUsers, scaleTokens int
	// only, if set, limits the run to these scenarios (suite.Names).
	only []string
}

func (c config) scale() bool { return c.scaleUsers > 0 || c.scaleTokens > 0 }

func parseFlags(args []string, stderr io.Writer) (config, error) {
	fs := flag.NewFlagSet("gatehouse-bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var c config
	mode := fs.String("mode", "all", "embedded, distributed or all")
	fs.StringVar(&c.bin, "bin", "bin", "directory holding edge, authn, tokens and directory (make build)")
	fs.IntVar(&c.requests, "requests", 5000, "measured requests per scenario (enough for 10 ms CPU ticks and a noisy shared machine)")
	// 2,000: login-totp's target is judged on the difference of two
	// scenarios' CPU, which a run of 1,000 logins each measures only to
	// about ±0.04 of login's (bench/README, "Since e2c3d1f").
	fs.IntVar(&c.loginRequests, "login-requests", 2000, "measured logins of the login and login-totp scenarios each (each checks a password with argon2id; the RSS budget is after them)")
	fs.IntVar(&c.warmup, "warmup", 500, "unmeasured requests sent first per scenario, in rounds until -warmup-time has passed")
	fs.DurationVar(&c.warmupTime, "warmup-time", 3*time.Second, "least duration of each scenario's warm-up")
	// 16, as issue 14's side-by-side runs of Gatehouse, Hydra and Dex: the
	// targets are judged under that load.
	fs.IntVar(&c.concurrency, "concurrency", 16, "concurrent keep-alive connections")
	fs.DurationVar(&c.timeout, "timeout", 30*time.Minute, "time limit of the whole run")
	fs.StringVar(&c.postgres, "postgres", "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable",
		"PostgreSQL on which the distributed run creates and drops its own database (loopback only)")
	fs.StringVar(&c.redis, "redis", "redis://127.0.0.1:6379/15",
		"Redis database for the distributed run; keys created during the run are deleted (loopback only)")
	fs.StringVar(&c.jsonPath, "json", "bench/results/latest.json",
		"results file (JSON), relative to the repository's root unless absolute; empty writes none")
	fs.IntVar(&c.scaleUsers, "scale-users", 0, "bench-scale: users to seed between a measurement on the empty database and one at scale (distributed only)")
	fs.IntVar(&c.scaleTokens, "scale-tokens", 0, "bench-scale: access and refresh tokens (half each) to seed likewise")
	scenarios := fs.String("scenarios", "", "comma-separated scenario names to run instead of all (for profiling; writes no results file unless -json is given)")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	var problems []string
	if *scenarios != "" {
		for _, s := range strings.Split(*scenarios, ",") {
			if !slices.Contains(suite.Names, s) {
				problems = append(problems, fmt.Sprintf("-scenarios: unknown scenario %q (want some of %s)", s, strings.Join(suite.Names, ", ")))
			}
			c.only = append(c.only, s)
		}
		jsonSet := false
		fs.Visit(func(f *flag.Flag) { jsonSet = jsonSet || f.Name == "json" })
		if !jsonSet {
			c.jsonPath = ""
		}
	}
	if c.scale() {
		jsonSet := false
		fs.Visit(func(f *flag.Flag) { jsonSet = jsonSet || f.Name == "json" })
		if !jsonSet {
			c.jsonPath = "bench/results/scale.json"
		}
		if *mode == "all" {
			*mode = "distributed"
		}
		if *mode != "distributed" {
			problems = append(problems, "-scale-users and -scale-tokens: a distributed run (PostgreSQL) only")
		}
	}
	if c.scaleUsers < 0 || c.scaleTokens < 0 {
		problems = append(problems, "-scale-users and -scale-tokens must not be negative")
	}
	switch *mode {
	case "all":
		c.embedded, c.distributed = true, true
	case "embedded":
		c.embedded = true
	case "distributed":
		c.distributed = true
	default:
		problems = append(problems, fmt.Sprintf("-mode: want embedded, distributed or all, got %q", *mode))
	}
	if c.requests < 1 || c.loginRequests < 1 || c.warmup < 0 || c.concurrency < 1 || c.warmupTime < 0 {
		problems = append(problems, "-requests, -login-requests and -concurrency must be positive, -warmup and -warmup-time not negative")
	}
	if c.timeout <= 0 {
		problems = append(problems, "-timeout must be positive")
	}
	if fs.NArg() > 0 {
		problems = append(problems, fmt.Sprintf("unexpected arguments %q", fs.Args()))
	}
	if len(problems) > 0 {
		err := errors.New(joinLines(problems))
		fmt.Fprintf(stderr, "gatehouse-bench: %v\n", err)
		return c, err
	}
	return c, nil
}

// loadAvg is the first three fields of /proc/loadavg: other work on the
// machine skews every figure, and this shows how much there was.
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}
