package process

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	httppprof "net/http/pprof"
	"os"
	"os/signal"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/KimMachineGun/automemlimit/memlimit"
	"github.com/redis/go-redis/v9"

	"github.com/gatehouse-id/gatehouse/pkg/config"
	"github.com/gatehouse-id/gatehouse/pkg/logging"
	"github.com/gatehouse-id/gatehouse/pkg/rpc"
	"github.com/gatehouse-id/gatehouse/pkg/secrets"
	"github.com/gatehouse-id/gatehouse/pkg/server"
	"github.com/gatehouse-id/gatehouse/pkg/telemetry"
)

// Component is what a process serves.
type Component interface {
	// Handler serves every path but /healthz, /readyz and /metrics.
	Handler() http.Handler
	// Checks are the dependencies /readyz probes.
	Checks() map[string]server.Check
	// Close releases resources after the server has stopped.
	Close() error
}

// Env is what a Build function gets.
type Env struct {
	Config    *config.Config
	Logger    *slog.Logger
	Telemetry *telemetry.Telemetry
}

// Detailer is a Component that reports facts for /readyz (optional).
type Detailer interface {
	Details() map[string]any
}

// Build assembles the process's component.
type Build func(ctx context.Context, env Env) (Component, error)

// Exit codes.
const (
	ExitOK     = 0
	ExitFailed = 1
	ExitConfig = 2
)

// Main runs a process and returns its exit code; cmd mains call
// os.Exit(process.Main(...)).
func Main(role config.Role, build Build, sections ...config.Section) int {
	tuneGC(memlimit.FromCgroup)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	return Run(ctx, role, os.Getenv, os.Stderr, build, nil, sections...)
}

// memoryLimitShare is the part of the container's memory limit the Go heap
// is held to (GOMEMLIMIT), leaving room for stacks, the binary and what
// the runtime does not count, so the collector works harder before the
// kernel kills the process rather than after.
const memoryLimitShare = 0.9

// tuneGC sets the heap's soft limit to memoryLimitShare of what limit
// reports (memlimit.FromCgroup: the container's cgroup v2 or v1 limit, the
// smallest along its path), unless GOMEMLIMIT is set (automemlimit leaves
// it then, as it does with AUTOMEMLIMIT=off). It returns the limit in
// force.
//
// GOGC stays Go's default (100) unless the operator sets it. Gatehouse
// used 400 (less collection, a heap up to five times the live data). Once
// password checks stopped putting 19 MiB of argon2id memory on the heap
// (pkg/secrets), make bench's distributed runs (three at each setting)
// differed by less than their run-to-run noise (±5%) on every scenario,
// while directory's RSS after the logins was 79–80 MB at 100 and 93–119 MB
// at 400.
func tuneGC(limit memlimit.Provider) int64 {
	// Its logger stays silent: this runs before the configured one exists,
	// and a process without a limit is the common case, not news.
	set, _ := memlimit.Set(memlimit.WithRatio(memoryLimitShare), memlimit.WithProvider(limit))
	return set
}

// Run is Main with its inputs explicit, for tests. ready, if not nil,
// receives the bound address once the server listens. sections are the
// configuration sections of the services the process runs (config.Load);
// a section a service reads later that is invalid (config.Error) still
// exits with ExitConfig.
func Run(ctx context.Context, role config.Role, getenv config.Getenv, stderr io.Writer, build Build, ready func(addr string), sections ...config.Section) int {
	cfg, err := config.Load(role, getenv, sections...)
	if err != nil {
		fmt.Fprintf(stderr, "gatehouse %s: %v\n", role, err)
		return ExitConfig
	}
	out, closeLog := logging.Buffer(stderr)
	defer closeLog()
	log := logging.New(out, cfg.LogLevel).With("process", string(role))
	// go-redis logs connection trouble as plain text on stderr: route it
	// through the JSON logger (process-wide, as go-redis's logger is).
	redis.SetLogger(redisLogger{log})
	if err := run(ctx, cfg, getenv, log, build, ready); err != nil {
		if cerr := (*config.Error)(nil); errors.As(err, &cerr) {
			fmt.Fprintf(stderr, "gatehouse %s: %v\n", role, cerr)
			return ExitConfig
		}
		log.Error("stopped with error", "err", err)
		return ExitFailed
	}
	log.Info("stopped")
	return ExitOK
}

func run(ctx context.Context, cfg *config.Config, getenv config.Getenv, log *slog.Logger, build Build, ready func(string)) error {
	tel, err := telemetry.Setup(ctx, string(cfg.Role), telemetry.Options{Getenv: getenv})
	if err != nil {
		return err
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := tel.Shutdown(sctx); err != nil {
			log.Warn("telemetry shutdown", "err", err)
		}
	}()
	if err := hashMetrics(); err != nil {
		return err
	}
	if _, err := cfg.LoadMasterKey(); err != nil {
		return err
	}
	comp, err := build(ctx, Env{Config: cfg, Logger: log, Telemetry: tel})
	if err != nil {
		return fmt.Errorf("start %s: %w", cfg.Role, err)
	}
	// /metrics never on the public address: on its own listener when
	// GATEHOUSE_METRICS_ADDR is set, else on the internal services' own
	// (not routed by edge) and not at all on edge's.
	metrics := tel.MetricsHandler()
	if cfg.MetricsAddr != "" {
		stop, err := serveMetrics(cfg.MetricsAddr, metrics, cfg.Pprof, log)
		if err != nil {
			return errors.Join(err, comp.Close())
		}
		defer stop()
		metrics = nil
	} else if cfg.Role == config.RoleEdge {
		metrics = nil
	}
	var details func() map[string]any
	if d, ok := comp.(Detailer); ok {
		details = d.Details
	}
	handler := comp.Handler()
	if cfg.Role != config.RoleEdge {
		// Edge resolves client addresses; a service believes edge's
		// X-Real-Ip and never its direct caller's.
		handler = rpc.GuardClientAddr(cfg.InternalToken, handler)
	}
	srv := server.New(server.Options{
		Name:            string(cfg.Role),
		Addr:            cfg.Addr,
		Handler:         handler,
		Logger:          log,
		Checks:          comp.Checks(),
		Metrics:         metrics,
		AccessLog:       cfg.Role != config.RoleEdge, // edge's router logs richer lines
		ShutdownTimeout: cfg.ShutdownTimeout,
		DrainDelay:      cfg.DrainDelay,
		Details:         details,
	})
	if err := srv.Listen(); err != nil {
		return errors.Join(err, comp.Close())
	}
	if ready != nil {
		ready(srv.Addr())
	}
	err = srv.Run(ctx)
	return errors.Join(err, comp.Close())
}

// serveMetrics serves /metrics alone (and with pprof, Go's profiler under
// /debug/pprof/) on addr until stop is called.
func serveMetrics(addr string, h http.Handler, pprof bool, log *slog.Logger) (stop func(), err error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("GATEHOUSE_METRICS_ADDR: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", h)
	if pprof {
		mux.HandleFunc("GET /debug/pprof/", httppprof.Index)
		mux.HandleFunc("GET /debug/pprof/cmdline", httppprof.Cmdline)
		mux.HandleFunc("GET /debug/pprof/profile", httppprof.Profile)
		mux.HandleFunc("GET /debug/pprof/symbol", httppprof.Symbol)
		mux.HandleFunc("GET /debug/pprof/trace", httppprof.Trace)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	log.Info("metrics listening", "addr", ln.Addr().String())
	return func() { _ = srv.Close() }, nil
}

// redisLogger is go-redis's logger over slog, at Warn: go-redis logs only
// trouble (failed dials, pool problems).
type redisLogger struct{ log *slog.Logger }

func (l redisLogger) Printf(ctx context.Context, format string, v ...any) {
	l.log.WarnContext(ctx, "redis: "+fmt.Sprintf(format, v...))
}

// Totals of the password hashes and verifications this process ran, and
// the CPU time they took (their threads' own, on Linux): what logins cost
// in hashing, apart from everything else (/metrics, make bench).
var (
	hashes, hashCPU atomic.Int64
	observeHashes   sync.Once
)

// hashStats returns the number of password hashes and verifications run
// so far and the CPU time they took.
func hashStats() (count int64, cpu time.Duration) {
	return hashes.Load(), time.Duration(hashCPU.Load())
}

// hashMetrics counts the password hashes this process runs and their CPU
// time (secrets.SetObserver) and publishes them: how much of a login's
// cost is argon2id, for capacity planning (and make bench's split of the
// login scenario).
func hashMetrics() error {
	observeHashes.Do(func() {
		secrets.SetObserver(func(fn func()) {
			hashCPU.Add(int64(timeOnThread(fn)))
			hashes.Add(1)
		})
	})
	if err := telemetry.CounterFunc("gatehouse.password.hashes", "1",
		"Password hashes and verifications run (argon2id or bcrypt).",
		func() float64 { n, _ := hashStats(); return float64(n) }); err != nil {
		return err
	}
	return telemetry.CounterFunc("gatehouse.password.hash.cpu", "s",
		"CPU time of the password hashes and verifications, on their own threads.",
		func() float64 { _, cpu := hashStats(); return cpu.Seconds() })
}
