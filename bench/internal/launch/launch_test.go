package launch

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"

	"github.com/gatehouse-id/gatehouse/bench/internal/floor"
	"github.com/gatehouse-id/gatehouse/pkg/testutil"
)

var (
	buildOnce sync.Once
	binDir    string
	buildErr  error
	buildOut  []byte
)

// binaries builds the four commands as `make build` does, once per test
// binary, so the launcher is tested against the real processes.
func binaries(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		binDir, buildErr = os.MkdirTemp("", "gatehouse-bench-bin-")
		if buildErr != nil {
			return
		}
		cmd := exec.Command("go", "build", "-trimpath", "-o", binDir+string(filepath.Separator),
			"github.com/gatehouse-id/gatehouse/services/edge/cmd/edge",
			"github.com/gatehouse-id/gatehouse/services/authn/cmd/authn",
			"github.com/gatehouse-id/gatehouse/services/tokens/cmd/tokens",
			"github.com/gatehouse-id/gatehouse/services/directory/cmd/directory")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		buildOut, buildErr = cmd.CombinedOutput()
	})
	if buildErr != nil {
		t.Fatalf("go build: %v\n%s", buildErr, buildOut)
	}
	return binDir
}

func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// checkServes asserts the deployment's edge serves the key set with the
// configured algorithm, and that its processes use CPU.
func checkServes(t *testing.T, d *Deployment, alg string) {
	t.Helper()
	res, err := http.Get(d.Base + "/oauth/v2/keys")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var ks struct {
		Keys []struct {
			Alg string `json:"alg"`
		} `json:"keys"`
	}
	if err := json.NewDecoder(res.Body).Decode(&ks); err != nil || res.StatusCode != 200 {
		t.Fatalf("GET /oauth/v2/keys: %d %v", res.StatusCode, err)
	}
	found := false
	for _, k := range ks.Keys {
		found = found || k.Alg == alg
	}
	if !found {
		t.Fatalf("key set %+v has no %s key", ks.Keys, alg)
	}
	checkFloorHeaders(t, res.Header)
	if st, err := os.Stat(d.KeyFile); err != nil || st.Size() == 0 {
		t.Fatalf("bootstrap key file %s: %v", d.KeyFile, err)
	}
	cpu, err := d.CPU()
	if err != nil {
		t.Fatal(err)
	}
	if cpu <= 0 {
		t.Fatalf("CPU() = %v after start-up; want > 0", cpu)
	}
}

// checkFloorHeaders asserts the bare server of the bench's floor answers
// with the header fields of Gatehouse's key set (h), values included but
// for the per-response ETag and X-Request-Id, which have the same length.
func checkFloorHeaders(t *testing.T, h http.Header) {
	t.Helper()
	want := map[string]string{}
	for _, kv := range floor.KeySetHeaders {
		want[kv[0]] = kv[1]
	}
	for name, values := range h {
		if name == "Date" || name == "Content-Length" {
			continue
		}
		w, ok := want[name]
		switch {
		case !ok:
			t.Errorf("the key set has %s, which floor.KeySetHeaders lacks", name)
		case len(values) != 1:
			t.Errorf("the key set has %d %s fields; want one", len(values), name)
		case name == "Etag" || name == "X-Request-Id":
			if len(values[0]) != len(w) {
				t.Errorf("the key set's %s %q is not as long as the floor's %q", name, values[0], w)
			}
		case values[0] != w:
			t.Errorf("the key set's %s is %q; the floor's %q", name, values[0], w)
		}
		delete(want, name)
	}
	for name := range want {
		t.Errorf("floor.KeySetHeaders has %s, which the key set lacks", name)
	}
}

// checkUsage asserts the deployment reports the CPU of exactly the named
// processes, every one of which has used some, and the memory of each but
// PostgreSQL.
func checkUsage(t *testing.T, d *Deployment, names ...string) {
	t.Helper()
	ctx := context.Background()
	// CPU is read in clock ticks (10 ms): a process that has done less
	// reads 0, so the deployment serves requests until each has one.
	var cpu map[string]time.Duration
	for deadline := time.Now().Add(10 * time.Second); ; {
		var err error
		if cpu, err = d.CPUByProcess(ctx); err != nil {
			t.Fatal(err)
		}
		if !slices.ContainsFunc(names, func(n string) bool { return cpu[n] <= 0 }) || time.Now().After(deadline) {
			break
		}
		for range 20 {
			if res, err := http.Get(d.Base + "/oauth/v2/keys"); err == nil {
				_, _ = io.Copy(io.Discard, res.Body)
				res.Body.Close()
			}
		}
	}
	rss, err := d.RSSByProcess(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(cpu) != len(names) {
		t.Errorf("CPUByProcess = %v; want exactly %v", cpu, names)
	}
	for _, n := range names {
		if cpu[n] <= 0 {
			t.Errorf("CPUByProcess()[%s] = %v; want > 0", n, cpu[n])
		}
		if _, ok := rss[n]; ok == (n == Postgres) || (ok && rss[n] <= 0) {
			t.Errorf("RSSByProcess()[%s] = %d, %v; want a size for every process but PostgreSQL's", n, rss[n], ok)
		}
	}
}

func TestParseRedisInfo(t *testing.T) {
	info := "# CPU\r\nused_cpu_sys:1.250000\r\nused_cpu_user:0.000250\r\nused_cpu_sys_children:9.0\r\n\r\n" +
		"# Memory\r\nused_memory:900000\r\nused_memory_rss:12345678\r\n"
	u, err := parseRedisInfo(info)
	if err != nil {
		t.Fatal(err)
	}
	if want := (redisUsage{cpu: 1250250 * time.Microsecond, rss: 12345678}); u != want {
		t.Fatalf("parseRedisInfo = %+v; want %+v", u, want)
	}
	for _, bad := range []string{"used_cpu_sys:1\r\nused_memory_rss:1\r\n", "used_cpu_sys:x\r\nused_cpu_user:1\r\nused_memory_rss:1\r\n"} {
		if _, err := parseRedisInfo(bad); err == nil {
			t.Errorf("parseRedisInfo(%q) succeeded; want an error", bad)
		}
	}
}

func TestEmbeddedStartsAndStopsCleanly(t *testing.T) {
	bin := binaries(t)
	ctx := context.Background()
	d, err := StartEmbedded(ctx, Options{BinDir: bin, WorkDir: t.TempDir(), Algorithm: "ES256", StartTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if len(d.PIDs()) != 1 || d.Database != "" {
		t.Fatalf("embedded: pids %v, database %q; want one process, no database", d.PIDs(), d.Database)
	}
	checkServes(t, d, "ES256")
	checkUsage(t, d, "edge")
	pid := d.PIDs()[0]
	sctx, cancel := context.WithTimeout(ctx, stopTimeout)
	defer cancel()
	if err := d.Stop(sctx); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if _, err := os.Stat("/proc/" + strconv.Itoa(pid)); err == nil {
		t.Fatalf("process %d still exists after Stop", pid)
	}
}

func TestStartFailsWithoutBinaries(t *testing.T) {
	_, err := StartEmbedded(context.Background(), Options{BinDir: t.TempDir(), WorkDir: t.TempDir(), Algorithm: "RS256", StartTimeout: time.Minute})
	if err == nil || !strings.Contains(err.Error(), "make build") {
		t.Fatalf("got %v; want an error that says to run make build", err)
	}
}

func TestDistributedCreatesAndDropsItsDatabase(t *testing.T) {
	b := Backends{PostgresURL: testutil.PostgresURL(t), RedisURL: testutil.RedisURL(t)}
	if err := b.Check(context.Background()); err != nil {
		t.Fatalf("Check: %v", err)
	}
	bin := binaries(t)
	ctx := context.Background()
	d, err := StartDistributed(ctx, Options{BinDir: bin, WorkDir: t.TempDir(), Algorithm: "RS256", StartTimeout: time.Minute}, b)
	if err != nil {
		t.Fatal(err)
	}
	if len(d.PIDs()) != 4 || !strings.HasPrefix(d.Database, "gatehouse_bench_") {
		t.Fatalf("distributed: pids %v, database %q; want four processes and a bench database", d.PIDs(), d.Database)
	}
	checkServes(t, d, "RS256")
	checkUsage(t, d, "directory", "tokens", "authn", "edge", Postgres, Redis)
	if !databaseExists(t, b.PostgresURL, d.Database) {
		t.Fatalf("database %s does not exist while running", d.Database)
	}
	name := d.Database
	sctx, cancel := context.WithTimeout(ctx, stopTimeout)
	defer cancel()
	if err := d.Stop(sctx); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if databaseExists(t, b.PostgresURL, name) {
		t.Fatalf("database %s still exists after Stop", name)
	}
}

func TestRedisSnapshotDeletesOnlyNewMatchingKeys(t *testing.T) {
	u := testutil.RedisURL(t)
	opts, _ := redis.ParseURL(u)
	rdb := redis.NewClient(opts)
	defer rdb.Close()
	ctx := context.Background()
	prefix := "benchtest:" + testutil.RandomSuffix(6) + ":"
	t.Cleanup(func() { rdb.Del(context.Background(), prefix+"old", prefix+"new", "other"+prefix) })
	if err := rdb.Set(ctx, prefix+"old", "1", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	del, err := redisSnapshot(ctx, u, prefix+"*")
	if err != nil {
		t.Fatal(err)
	}
	rdb.Set(ctx, prefix+"new", "1", time.Minute)
	rdb.Set(ctx, "other"+prefix, "1", time.Minute)
	if err := del(ctx); err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]int64{prefix + "old": 1, prefix + "new": 0, "other" + prefix: 1} {
		if got := rdb.Exists(ctx, k).Val(); got != want {
			t.Errorf("EXISTS %s = %d; want %d", k, got, want)
		}
	}
}

func TestBackendsMustBeLoopback(t *testing.T) {
	err := Backends{PostgresURL: "postgres://postgres@192.0.2.1:5432/x", RedisURL: "redis://192.0.2.1:6379/0"}.Check(context.Background())
	if err == nil || strings.Count(err.Error(), "not a loopback address") != 2 {
		t.Fatalf("got %v; want both backends refused as not loopback", err)
	}
}

func TestChildEnvDropsInheritedConfiguration(t *testing.T) {
	t.Setenv("GATEHOUSE_DATABASE_URL", "postgres://elsewhere/db")
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318")
	t.Setenv("GOGC", "150")
	t.Setenv("GOMAXPROCS", "1")
	env := strings.Join(ChildEnv(map[string]string{"GATEHOUSE_ADDR": "127.0.0.1:1"}), "\n")
	if !strings.Contains(env, "GOGC=150") || !strings.Contains(env, "GOMAXPROCS=1") {
		t.Fatalf("child environment lacks the parent's GOGC or GOMAXPROCS:\n%s", env)
	}
	if strings.Contains(env, "DATABASE_URL") || strings.Contains(env, "OTEL_") {
		t.Fatalf("child environment inherits configuration:\n%s", env)
	}
	if !strings.Contains(env, "GATEHOUSE_ADDR=127.0.0.1:1") || !strings.Contains(env, "PATH=") {
		t.Fatalf("child environment lacks its own settings or PATH:\n%s", env)
	}
}

func databaseExists(t *testing.T, base, name string) bool {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var n int
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM pg_database WHERE datname = $1", name).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n == 1
}
