package process_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gatehouse-id/gatehouse/pkg/config"
	"github.com/gatehouse-id/gatehouse/pkg/process"
	"github.com/gatehouse-id/gatehouse/pkg/rpc"
	"github.com/gatehouse-id/gatehouse/pkg/server"
	"github.com/gatehouse-id/gatehouse/pkg/testutil"
)

// echoAddr is a component answering the X-Real-Ip it sees.
type echoAddr struct{}

func (echoAddr) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, r.Header.Get("X-Real-Ip"))
	})
}
func (echoAddr) Checks() map[string]server.Check { return nil }
func (echoAddr) Close() error                    { return nil }

// start runs role as its main would and returns its base URL.
func start(t *testing.T, role config.Role, env map[string]string) string {
	t.Helper()
	env["GATEHOUSE_ADDR"] = "127.0.0.1:0"
	env["GATEHOUSE_DATA_DIR"] = t.TempDir()
	env["GATEHOUSE_DRAIN_DELAY"] = "0s"
	ctx, cancel := context.WithCancel(context.Background())
	addr, done := make(chan string, 1), make(chan int, 1)
	build := func(context.Context, process.Env) (process.Component, error) { return echoAddr{}, nil }
	go func() {
		done <- process.Run(ctx, role, func(k string) string { return env[k] }, io.Discard, build, func(a string) { addr <- a })
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	select {
	case a := <-addr:
		return "http://" + a
	case code := <-done:
		t.Fatalf("%s exited with %d", role, code)
	case <-time.After(30 * time.Second):
		t.Fatalf("%s did not start", role)
	}
	return ""
}

func clientAddr(t *testing.T, base string, header map[string]string) string {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, base+"/ui/login", nil)
	for k, v := range header {
		req.Header.Set(k, v)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return string(b)
}

// TestServicesBelieveOnlyEdgesClientAddress: a request straight to a
// service with a forged X-Real-Ip (and the hop-by-hop header that would
// make a proxy drop edge's) is attributed to its socket address; with
// edge's proof the address edge resolved passes.
func TestServicesBelieveOnlyEdgesClientAddress(t *testing.T) {
	const token = "process-test-internal-token-0123456789"
	base := start(t, config.RoleAuthn, map[string]string{
		"GATEHOUSE_INTERNAL_TOKEN": token,
		"GATEHOUSE_DIRECTORY_URL":  "http://127.0.0.1:1",
		"GATEHOUSE_TOKENS_URL":     "http://127.0.0.1:1",
	})
	if got := clientAddr(t, base, map[string]string{"X-Real-Ip": "203.0.113.9", "Connection": "X-Real-Ip"}); got != "127.0.0.1" {
		t.Errorf("forged X-Real-Ip: the service saw %q; want the socket address 127.0.0.1", got)
	}
	if got := clientAddr(t, base, map[string]string{"X-Real-Ip": "203.0.113.9", rpc.InternalTokenHeader: token}); got != "127.0.0.1" {
		t.Errorf("forged X-Real-Ip with the internal credential: the service saw %q; want 127.0.0.1 (only edge's proof counts)", got)
	}
	if got := clientAddr(t, base, map[string]string{"X-Real-Ip": "203.0.113.9", rpc.EdgeProofHeader: rpc.EdgeProof(token)}); got != "203.0.113.9" {
		t.Errorf("X-Real-Ip with edge's proof: the service saw %q; want 203.0.113.9", got)
	}
}

// TestEdgeResolvesItsOwnClientAddress: edge is not guarded (its router
// resolves the address itself), so its component sees what it set.
func TestEdgeResolvesItsOwnClientAddress(t *testing.T) {
	base := start(t, config.RoleEdge, map[string]string{})
	if got := clientAddr(t, base, map[string]string{"X-Real-Ip": "203.0.113.9"}); got != "203.0.113.9" {
		t.Errorf("edge's component saw %q; want the header unchanged (edge's router owns it)", got)
	}
}

// TestPprofOnlyOnTheMetricsListener: GATEHOUSE_PPROF serves Go's profiler
// on GATEHOUSE_METRICS_ADDR only; off (the default) it is nowhere.
func TestPprofOnlyOnTheMetricsListener(t *testing.T) {
	get := func(url string) (int, string) {
		t.Helper()
		res, err := http.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}
	for _, on := range []bool{true, false} {
		metrics := testutil.FreeAddr(t)
		env := map[string]string{"GATEHOUSE_METRICS_ADDR": metrics}
		if on {
			env["GATEHOUSE_PPROF"] = "true"
		}
		base := start(t, config.RoleEdge, env)
		status, body := get("http://" + metrics + "/debug/pprof/")
		if on && (status != 200 || !strings.Contains(body, "goroutine")) {
			t.Fatalf("pprof on: metrics listener /debug/pprof/ = %d; want the profiler's index", status)
		}
		if !on && status != 404 {
			t.Fatalf("pprof off: metrics listener /debug/pprof/ = %d; want 404", status)
		}
		if _, body := get(base + "/debug/pprof/"); strings.Contains(body, "goroutine") {
			t.Fatal("the public listener serves the profiler")
		}
	}
}
