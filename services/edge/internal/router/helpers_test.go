package router

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/gatehouse-id/gatehouse/pkg/testutil"
	"github.com/gatehouse-id/gatehouse/services/edge/internal/edgetest"
	"github.com/gatehouse-id/gatehouse/services/edge/internal/proxy"
	"github.com/gatehouse-id/gatehouse/services/edge/internal/routes"
)

// modes run a test with the services mounted in-process and behind proxies.
var modes = []string{"in-process", "proxied"}

type fixture struct {
	edge     *url.URL
	logs     *syncBuffer
	backends map[routes.Service]*edgetest.Backend
	servers  map[routes.Service]*edgetest.Server // proxied mode only
}

// newFixture starts edge over a real HTTP/1.1 + h2c server with recording
// backends. configure may adjust the options before New.
func newFixture(t *testing.T, mode string, configure func(*Options)) *fixture {
	t.Helper()
	f := &fixture{
		logs:     &syncBuffer{},
		backends: map[routes.Service]*edgetest.Backend{},
		servers:  map[routes.Service]*edgetest.Server{},
	}
	logger := slog.New(slog.NewJSONHandler(f.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	opts := Options{Logger: logger, Services: map[routes.Service]http.Handler{}}
	for _, svc := range routes.Services() {
		b := &edgetest.Backend{Name: string(svc)}
		f.backends[svc] = b
		switch mode {
		case "in-process":
			opts.Services[svc] = b
		case "proxied":
			srv := edgetest.Start(t, b)
			f.servers[svc] = srv
			p, err := proxy.New(srv.URL, string(svc), logger)
			if err != nil {
				t.Fatalf("proxy.New: %v", err)
			}
			t.Cleanup(p.CloseIdleConnections)
			opts.Services[svc] = p
		default:
			t.Fatalf("unknown mode %q", mode)
		}
	}
	if configure != nil {
		configure(&opts)
	}
	h, err := New(opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	f.edge = edgetest.Start(t, h).URL
	return f
}

func (f *fixture) url(p string) string { return f.edge.String() + p }

// received counts requests across all backends.
func (f *fixture) received() int {
	n := 0
	for _, b := range f.backends {
		n += len(b.Requests())
	}
	return n
}

func get(t *testing.T, c *http.Client, rawURL string, header map[string]string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, rawURL, nil)
	if err != nil {
		t.Fatalf("new request: %v", err)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	return edgetest.Do(t, c, req)
}

func decodeError(t *testing.T, body []byte) map[string]string {
	t.Helper()
	var m map[string]string
	if err := json.Unmarshal(body, &m); err != nil {
		t.Fatalf("body %q is not a JSON error: %v", body, err)
	}
	return m
}

// logLines parses the JSON log lines.
func (b *syncBuffer) lines(t *testing.T) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(b.String()), "\n") {
		if line == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		out = append(out, m)
	}
	return out
}

// waitFor waits until the logs contain s: the access log line is written
// after the response went out, so the client may see the response first.
func (b *syncBuffer) waitFor(t *testing.T, s string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(b.String(), s) {
		if time.Now().After(deadline) {
			t.Fatalf("logs never contained %s:\n%s", s, b.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

type syncBuffer struct{ testutil.SyncBuffer }

// unsizedReader hides its length so the client streams the body chunked
// (HTTP/1.1) or without Content-Length (HTTP/2).
func unsizedReader(n int) io.Reader {
	return io.MultiReader(strings.NewReader(strings.Repeat("x", n)))
}
