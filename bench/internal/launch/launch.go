package launch

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/gatehouse-id/gatehouse/bench/internal/procstat"
)

// Options configure a deployment.
type Options struct {
	BinDir    string // holds edge, authn, tokens, directory (make build)
	WorkDir   string // parent of the data directories and logs; must exist
	Algorithm string // GATEHOUSE_SIGNING_ALGORITHM
	// StartTimeout bounds the wait for every process to become ready.
	StartTimeout time.Duration
}

// Deployment is a running Gatehouse made of child processes.
type Deployment struct {
	Base    string // edge's base URL, also the issuer
	KeyFile string // bootstrap-admin-key.json in directory's data directory
	// Database is the PostgreSQL database created for the deployment (and
	// dropped by Stop); empty in embedded mode.
	Database string
	procs    []*child
	// rdb is the deployment's Redis, asked for its CPU and memory; nil in
	// embedded mode.
	rdb     *redis.Client
	cleanup []func(context.Context) error // run after the processes stop, last first
}

// PIDs are the deployment's process ids.
func (d *Deployment) PIDs() []int {
	out := make([]int, len(d.procs))
	for i, p := range d.procs {
		out[i] = p.cmd.Process.Pid
	}
	return out
}

// Bases are the base URLs of the deployment's processes' /metrics (edge
// first in embedded mode, the only one).
func (d *Deployment) Bases() []string {
	out := make([]string, len(d.procs))
	for i, p := range d.procs {
		out[i] = p.base
		if p.metrics != "" {
			out[i] = p.metrics
		}
	}
	return out
}

// CPU is the total CPU time the deployment's processes have used.
func (d *Deployment) CPU() (time.Duration, error) {
	for _, p := range d.procs {
		if err := p.exited(); err != nil {
			return 0, err
		}
	}
	return procstat.Sum(d.PIDs()...)
}

// Stop sends SIGTERM to every process (edge first, so no request is proxied
// to a stopped service), waits for them to exit (SIGKILL after the ctx
// deadline), then drops what the deployment created. It returns an error
// when a process did not exit cleanly or a cleanup failed.
func (d *Deployment) Stop(ctx context.Context) error {
	var errs []error
	for i := len(d.procs) - 1; i >= 0; i-- {
		if err := d.procs[i].stop(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	for i := len(d.cleanup) - 1; i >= 0; i-- {
		if err := d.cleanup[i](ctx); err != nil {
			errs = append(errs, err)
		}
	}
	d.procs, d.cleanup, d.rdb = nil, nil, nil
	return errors.Join(errs...)
}

// child is one started binary.
type child struct {
	name string
	base string
	// metrics is where its /metrics is served, when not at base.
	metrics string
	log     string
	cmd     *exec.Cmd
	done    chan struct{}
	err     error // Wait's result, set before done closes
}

// start runs bin/name with exactly env (plus PATH), logging to a file.
func start(o Options, name, addr string, env map[string]string) (*child, error) {
	logPath := filepath.Join(o.WorkDir, name+".log")
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("%s log: %w", name, err)
	}
	bin := filepath.Join(o.BinDir, name)
	cmd := exec.Command(bin)
	cmd.Env = ChildEnv(env)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	// The children die with the tool, even when it is killed.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("start %s (run make build first): %w", bin, err)
	}
	c := &child{name: name, base: "http://" + addr, log: logPath, cmd: cmd, done: make(chan struct{})}
	go func() {
		c.err = cmd.Wait()
		logFile.Close()
		close(c.done)
	}()
	return c, nil
}

// ChildEnv is env plus the parent's PATH and HOME, and Go's runtime
// settings (GOGC, GOMEMLIMIT, GOMAXPROCS, GODEBUG) when the parent sets them, to
// measure the server under another collector setting. Inherited
// GATEHOUSE_* or OTEL_* variables would change what is measured (or send
// telemetry off the machine).
func ChildEnv(env map[string]string) []string {
	out := make([]string, 0, len(env)+7)
	for _, k := range []string{"PATH", "HOME", "TMPDIR", "GOGC", "GOMEMLIMIT", "GOMAXPROCS", "GODEBUG"} {
		if v, ok := os.LookupEnv(k); ok {
			out = append(out, k+"="+v)
		}
	}
	if _, ok := env["GATEHOUSE_DRAIN_DELAY"]; !ok {
		out = append(out, "GATEHOUSE_DRAIN_DELAY=0s") // nothing balances load here: stop at once
	}
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	return out
}

// exited reports an error when the process is no longer running.
func (c *child) exited() error {
	select {
	case <-c.done:
		return fmt.Errorf("%s exited (%v); log %s:\n%s", c.name, c.err, c.log, tail(c.log))
	default:
		return nil
	}
}

func (c *child) stop(ctx context.Context) error {
	select {
	case <-c.done:
		return fmt.Errorf("%s had already exited (%v); log %s", c.name, c.err, c.log)
	default:
	}
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-c.done:
		if c.err != nil {
			return fmt.Errorf("%s stopped with %v; log %s:\n%s", c.name, c.err, c.log, tail(c.log))
		}
		return nil
	case <-ctx.Done():
		_ = c.cmd.Process.Kill()
		<-c.done
		return fmt.Errorf("%s did not stop after SIGTERM; killed", c.name)
	}
}

// waitReady polls each process's /readyz, in order, until it answers 200.
func waitReady(ctx context.Context, procs []*child) error {
	client := &http.Client{Timeout: 2 * time.Second}
	for _, p := range procs {
		for {
			if err := p.exited(); err != nil {
				return err
			}
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, p.base+"/readyz", nil)
			if res, err := client.Do(req); err == nil {
				res.Body.Close()
				if res.StatusCode == http.StatusOK {
					break
				}
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("%s not ready at %s/readyz: %w; log %s:\n%s", p.name, p.base, ctx.Err(), p.log, tail(p.log))
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
	return nil
}

// waitFile waits for a file another process writes.
func waitFile(ctx context.Context, path string) error {
	for {
		if st, err := os.Stat(path); err == nil && st.Size() > 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s not written: %w", path, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// freeAddrs reserves n distinct loopback ports. They are released before
// the servers bind them; on a quiet machine nothing takes them in between.
func freeAddrs(n int) ([]string, error) {
	var (
		out []string
		lns []net.Listener
	)
	defer func() {
		for _, l := range lns {
			l.Close()
		}
	}()
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("reserve a loopback port: %w", err)
		}
		lns = append(lns, ln)
		out = append(out, ln.Addr().String())
	}
	return out, nil
}

// commonEnv is the environment every process of a deployment shares.
func commonEnv(o Options, issuer string) (map[string]string, error) {
	pw, err := randomString(12)
	if err != nil {
		return nil, err
	}
	return map[string]string{
		"GATEHOUSE_ISSUER":            issuer,
		"GATEHOUSE_SIGNING_ALGORITHM": o.Algorithm,
		"GATEHOUSE_RATE_LIMIT":        "0",
		// Never printed: the benchmark signs in with the bootstrap key.
		"GATEHOUSE_ADMIN_PASSWORD": "Bench-" + pw + "-9a!",
	}, nil
}

func randomString(n int) (string, error) {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return hex.EncodeToString(b), nil
}

func randomBase64(n int) (string, error) {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return base64.StdEncoding.EncodeToString(b), nil
}

// tail returns the last lines of a log file, for an error message.
func tail(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	lines := bytes.Split(bytes.TrimRight(b, "\n"), []byte("\n"))
	if len(lines) > 15 {
		lines = lines[len(lines)-15:]
	}
	return string(bytes.Join(lines, []byte("\n")))
}

func clone(m map[string]string) map[string]string {
	out := make(map[string]string, len(m)+4)
	for k, v := range m {
		out[k] = v
	}
	return out
}

// isLoopbackHost reports whether host (no port) is 127.0.0.1 or another
// loopback address.
func isLoopbackHost(host string) bool {
	ip := net.ParseIP(strings.Trim(host, "[]"))
	return ip != nil && ip.IsLoopback()
}

// ProfileEnv, when set, makes every Gatehouse process serve Go's profiler
// (GATEHOUSE_PPROF) on its metrics listener, and the bench print where:
// `BENCH_PPROF=1 make bench` then `go tool pprof <url>/debug/pprof/profile`
// during a scenario.
const ProfileEnv = "BENCH_PPROF"

// profiling sets up env of process name to serve the profiler on addr
// (its metrics listener) when ProfileEnv is set, and returns the metrics
// base URL ("" otherwise).
func profiling(env map[string]string, name, addr string) string {
	if os.Getenv(ProfileEnv) == "" {
		return ""
	}
	env["GATEHOUSE_PPROF"] = "true"
	env["GATEHOUSE_METRICS_ADDR"] = addr
	fmt.Fprintf(os.Stderr, "gatehouse-bench: %s serves /debug/pprof/ at http://%s\n", name, addr)
	return "http://" + addr
}
