package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gatehouse-id/gatehouse/pkg/logging"
	"github.com/gatehouse-id/gatehouse/pkg/rpc"
	"github.com/gatehouse-id/gatehouse/pkg/telemetry"
)

func start(t *testing.T, o Options) (base string, stop func() error) {
	t.Helper()
	o.Addr = "127.0.0.1:0"
	s := New(o)
	if err := s.Listen(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	var once bool
	stop = func() error {
		if once {
			return nil
		}
		once = true
		cancel()
		return <-done
	}
	t.Cleanup(func() { _ = stop() })
	return "http://" + s.Addr(), stop
}

func get(t *testing.T, c *http.Client, url string) (int, string) {
	t.Helper()
	res, err := c.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

func TestHealthReadyMetrics(t *testing.T) {
	tel, err := telemetry.Setup(context.Background(), "test", telemetry.Options{Getenv: func(string) string { return "" }})
	if err != nil {
		t.Fatal(err)
	}
	depErr := errors.New("connection refused")
	var failing bool
	base, _ := start(t, Options{
		Name:    "test",
		Handler: http.NotFoundHandler(),
		Metrics: tel.MetricsHandler(),
		Checks: map[string]Check{"database": func(context.Context) error {
			if failing {
				return depErr
			}
			return nil
		}},
	})
	c := http.DefaultClient
	if code, _ := get(t, c, base+"/healthz"); code != 200 {
		t.Fatalf("/healthz = %d; want 200", code)
	}
	if code, _ := get(t, c, base+"/readyz"); code != 200 {
		t.Fatalf("/readyz = %d; want 200", code)
	}
	failing = true
	code, body := get(t, c, base+"/readyz")
	if code != 503 || !strings.Contains(body, `"database"`) {
		t.Fatalf("/readyz with failing dependency = %d %s; want 503 naming database", code, body)
	}
	if strings.Contains(body, "connection refused") {
		t.Fatalf("/readyz leaks error detail: %s", body)
	}
	// An application request produces HTTP server metrics.
	get(t, c, base+"/anything")
	code, body = get(t, c, base+"/metrics")
	if code != 200 || !strings.Contains(body, "go_goroutines") || !strings.Contains(body, "http_server_request") {
		t.Fatalf("/metrics = %d; want Prometheus text with go and http server metrics, got:\n%.2000s", code, body)
	}
	// Accepted connections are counted: every request so far shared one
	// keep-alive connection; two without keep-alive open two more.
	if got := opened(t, body); got != 1 {
		t.Fatalf("connections opened = %d after requests on one keep-alive connection; want 1", got)
	}
	once := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	get(t, once, base+"/anything")
	get(t, once, base+"/anything")
	if _, body = get(t, c, base+"/metrics"); opened(t, body) != 3 {
		t.Fatalf("connections opened = %d; want 3", opened(t, body))
	}
}

var openedRE = regexp.MustCompile(`(?m)^gatehouse_http_server_connections_opened_total(?:\{[^}]*\})? (\d+)$`)

func opened(t *testing.T, metrics string) int {
	t.Helper()
	m := openedRE.FindStringSubmatch(metrics)
	if m == nil {
		t.Fatalf("no gatehouse_http_server_connections_opened_total in /metrics:\n%.3000s", metrics)
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

func TestH2CAndAccessLog(t *testing.T) {
	var buf bytes.Buffer
	log := logging.New(&buf, slog.LevelDebug)
	base, stop := start(t, Options{
		Name:      "test",
		Logger:    log,
		AccessLog: true,
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusTeapot)
			_, _ = io.WriteString(w, r.Proto)
		}),
	})
	c := &http.Client{Transport: rpc.NewH2CTransport()}
	req, _ := http.NewRequest(http.MethodGet, base+"/x?code=secretcode", nil)
	req.Header.Set("X-Request-Id", "req-123")
	res, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusTeapot || string(b) != "HTTP/2.0" {
		t.Fatalf("got %d %q; want 418 over HTTP/2.0", res.StatusCode, b)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	var line map[string]any
	for _, l := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(l), &m) == nil && m["msg"] == "request" {
			line = m
		}
	}
	if line == nil {
		t.Fatalf("no access log line in %s", buf.String())
	}
	if line["path"] != "/x" || line["status"] != float64(418) || line["request_id"] != "req-123" {
		t.Fatalf("access log = %v; want path /x, status 418, request_id req-123", line)
	}
	if strings.Contains(buf.String(), "secretcode") {
		t.Fatalf("access log contains the query string: %s", buf.String())
	}
}

// TestGracefulShutdown: a request in flight when shutdown begins completes
// with its full response, readiness turns false, and Run returns nil.
func TestGracefulShutdown(t *testing.T) {
	entered := make(chan struct{})
	release := make(chan struct{})
	base, stop := start(t, Options{
		Name: "test",
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			close(entered)
			<-release
			_, _ = io.WriteString(w, "finished")
		}),
	})
	type result struct {
		code int
		body string
		err  error
	}
	resc := make(chan result, 1)
	go func() {
		res, err := http.Get(base + "/slow")
		if err != nil {
			resc <- result{err: err}
			return
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		resc <- result{code: res.StatusCode, body: string(b)}
	}()
	<-entered
	stopped := make(chan error, 1)
	go func() { stopped <- stop() }()
	// Shutdown must wait for the in-flight request.
	select {
	case err := <-stopped:
		t.Fatalf("Run returned (%v) while a request was in flight", err)
	case <-time.After(100 * time.Millisecond):
	}
	close(release)
	r := <-resc
	if r.err != nil || r.code != 200 || r.body != "finished" {
		t.Fatalf("in-flight request = %d %q %v; want 200 finished", r.code, r.body, r.err)
	}
	if err := <-stopped; err != nil {
		t.Fatalf("Run = %v; want nil after graceful shutdown", err)
	}
	if _, err := http.Get(base + "/healthz"); err == nil {
		t.Fatalf("server still accepts connections after shutdown")
	}
}

// TestDrainKeepsServingWithReadyz503: after the stop signal the server
// keeps listening for DrainDelay — /readyz 503 with Retry-After, /healthz
// 200, application requests served — and only then stops accepting.
func TestDrainKeepsServingWithReadyz503(t *testing.T) {
	base, stop := start(t, Options{
		Name:       "test",
		DrainDelay: 700 * time.Millisecond,
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.WriteString(w, "served")
		}),
	})
	stopped := make(chan error, 1)
	go func() { stopped <- stop() }()
	// The drain has begun once /readyz says so (the stop runs on its own
	// goroutine): asked until then, never for longer than the drain.
	var res *http.Response
	var err error
	for deadline := time.Now().Add(600 * time.Millisecond); ; {
		if res, err = http.Get(base + "/readyz"); err == nil && res.StatusCode == http.StatusServiceUnavailable {
			break
		}
		if res != nil {
			res.Body.Close()
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz while draining: %v %v; want 503 with Retry-After", res, err)
		}
		runtime.Gosched()
	}
	if res.Header.Get("Retry-After") == "" {
		t.Fatalf("/readyz while draining: no Retry-After")
	}
	res.Body.Close()
	for _, path := range []string{"/healthz", "/app"} {
		res, err := http.Get(base + path)
		if err != nil || res.StatusCode != http.StatusOK {
			t.Fatalf("%s while draining: %v %v; want 200", path, res, err)
		}
		res.Body.Close()
	}
	select {
	case err := <-stopped:
		t.Fatalf("Run returned (%v) before the drain delay", err)
	default:
	}
	if err := <-stopped; err != nil {
		t.Fatal(err)
	}
	if _, err := http.Get(base + "/healthz"); err == nil {
		t.Fatal("still accepting after the drain")
	}
}

// At info level a service logs no line for a request that succeeded
// (edge's access log has it) and a warning for a 5xx.
func TestAccessLogLevels(t *testing.T) {
	var buf bytes.Buffer
	log := logging.New(&buf, slog.LevelInfo)
	base, stop := start(t, Options{
		Name:      "test",
		Logger:    log,
		AccessLog: true,
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/fail" {
				w.WriteHeader(http.StatusServiceUnavailable)
			}
		}),
	})
	for _, p := range []string{"/ok", "/fail"} {
		res, err := http.Get(base + p)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	var lines []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(l), &m) == nil && m["msg"] == "request" {
			lines = append(lines, m)
		}
	}
	if len(lines) != 1 || lines[0]["path"] != "/fail" || lines[0]["level"] != "WARN" || lines[0]["status"] != float64(503) {
		t.Fatalf("access lines at info level = %v; want one WARN line for /fail", lines)
	}
}
