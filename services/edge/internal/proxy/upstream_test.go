package proxy

import (
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sony/gobreaker/v2"
)

// service is a real net/http server that counts the connections it
// accepted and closed.
type service struct {
	srv    *http.Server
	addr   string
	conns  atomic.Int64 // connections accepted
	idle   atomic.Int64 // times a connection went idle
	closed atomic.Int64 // connections closed
}

func startService(t *testing.T, h http.HandlerFunc) *service {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &service{addr: ln.Addr().String()}
	s.srv = &http.Server{Handler: h, ConnState: func(_ net.Conn, st http.ConnState) {
		switch st {
		case http.StateNew:
			s.conns.Add(1)
		case http.StateIdle:
			s.idle.Add(1)
		case http.StateClosed, http.StateHijacked:
			s.closed.Add(1)
		}
	}}
	go func() { _ = s.srv.Serve(ln) }()
	t.Cleanup(func() { _ = s.srv.Close() })
	return s
}

// forward sends a request through p to the service and returns the
// response and its body.
func forward(t *testing.T, p *Proxy, method, path, body string) (*httptest.ResponseRecorder, string) {
	t.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	rec := httptest.NewRecorder()
	p.ServeHTTP(rec, httptest.NewRequest(method, path, r))
	return rec, rec.Body.String()
}

func newTestProxy(t *testing.T, addr string) *Proxy {
	t.Helper()
	target, _ := url.Parse("http://" + addr)
	p, err := New(target, "tokens", slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.CloseIdleConnections)
	return p
}

func echo(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	w.Header().Set("X-Method", r.Method)
	_, _ = io.WriteString(w, r.Method+" "+r.URL.RequestURI()+" "+string(b))
}

// Requests one after another share one connection to the service,
// whatever their method, body or status.
func TestUpstreamKeepsOneConnection(t *testing.T) {
	t.Parallel()
	svc := startService(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/empty" {
			w.WriteHeader(http.StatusNoContent)
			return
		}
		echo(w, r)
	})
	p := newTestProxy(t, svc.addr)
	for i := range 20 {
		switch i % 4 {
		case 0:
			if _, body := forward(t, p, "GET", "/a?x=1", ""); body != "GET /a?x=1 " {
				t.Fatalf("GET: %q", body)
			}
		case 1:
			if _, body := forward(t, p, "POST", "/token", "grant_type=x"); body != "POST /token grant_type=x" {
				t.Fatalf("POST: %q", body)
			}
		case 2:
			if res, _ := forward(t, p, "HEAD", "/a", ""); res.Header().Get("X-Method") != "HEAD" {
				t.Fatalf("HEAD: %v", res.Header())
			}
		case 3:
			if res, _ := forward(t, p, "GET", "/empty", ""); res.Code != http.StatusNoContent {
				t.Fatalf("204: %d", res.Code)
			}
		}
	}
	if n := svc.conns.Load(); n != 1 {
		t.Fatalf("%d connections for 20 requests in a row; want 1", n)
	}
}

// A connection the service closed while it was kept is not used: the next
// request, a POST that must not be sent twice, goes on a new connection
// and is answered.
func TestUpstreamDropsConnectionTheServiceClosed(t *testing.T) {
	t.Parallel()
	var posts atomic.Int64
	svc := startService(t, func(w http.ResponseWriter, r *http.Request) {
		if r.Method == "POST" {
			posts.Add(1)
		}
		echo(w, r)
	})
	p := newTestProxy(t, svc.addr)
	forward(t, p, "GET", "/", "")
	// The answer can reach the client before the server marks the
	// connection idle, and only idle connections are closed below.
	waitUntil(t, "the service marks the kept connection idle", func() bool { return svc.idle.Load() > 0 })
	svc.srv.SetKeepAlivesEnabled(false) // closes idle connections
	svc.srv.SetKeepAlivesEnabled(true)
	waitUntil(t, "the service closes the kept connection", func() bool { return svc.closed.Load() > 0 })
	if res, body := forward(t, p, "POST", "/token", "a=b"); res.Code != http.StatusOK || body != "POST /token a=b" {
		t.Fatalf("POST after the service closed the kept connection: %d %q", res.Code, body)
	}
	if n, posted := svc.conns.Load(), posts.Load(); n != 2 || posted != 1 {
		t.Fatalf("%d connections, %d POSTs; want 2 and 1", n, posted)
	}
}

// waitUntil polls cond (a real socket's state, which no synctest bubble
// can wait for) until it holds, for at most 5 s.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
	}
}

// Concurrent requests are answered, each on a connection of its own, and
// the connections are kept for the next ones (the Transport may dial one
// more while a busy one is on its way back to the pool, so the bound is
// loose).
func TestUpstreamConcurrent(t *testing.T) {
	t.Parallel()
	svc := startService(t, echo)
	p := newTestProxy(t, svc.addr)
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Go(func() {
			for range 50 {
				body := strings.Repeat("b", i+1)
				rec := httptest.NewRecorder()
				p.ServeHTTP(rec, httptest.NewRequest("POST", "/", strings.NewReader(body)))
				if got := rec.Body.String(); got != "POST / "+body {
					t.Errorf("got %d %q", rec.Code, got)
					return
				}
			}
		})
	}
	wg.Wait()
	if n := svc.conns.Load(); n > 32 {
		t.Fatalf("%d connections for 800 requests of 16 concurrent callers; want them kept and reused", n)
	}
}

// A service may answer before it has read the body (a 400, 405 or 413 for
// a request it refuses) and close the connection. That answer is what the
// client gets, never a 503: an anonymous client sending large bodies to
// such a route would otherwise count as the service failing and open
// edge's breaker for everyone.
func TestUpstreamEarlyAnswerIsTheResponse(t *testing.T) {
	t.Parallel()
	svc := startService(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Connection", "close")
		http.Error(w, "refused without reading the body", http.StatusBadRequest)
	})
	p := newTestProxy(t, svc.addr)
	big := strings.Repeat("x", 8<<20)
	for i := range 2 {
		res, body := forward(t, p, http.MethodPost, "/", big)
		if res.Code != http.StatusBadRequest || !strings.Contains(body, "refused") {
			t.Fatalf("request %d: %d %q; want the service's 400", i, res.Code, body)
		}
	}
	if st := p.breaker.cb.Load().State(); st != gobreaker.StateClosed {
		t.Fatalf("breaker %s after the service's own refusals; want closed", st)
	}
}

// A request that timed out waiting for the service's answer is not sent
// again, even a GET on a kept connection: a frozen service would make the
// client wait twice, and the service may have acted on it.
func TestUpstreamTimeoutIsNotRetried(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	var requests atomic.Int64
	svc := startService(t, func(w http.ResponseWriter, r *http.Request) {
		if requests.Add(1) > 1 {
			<-release
		}
	})
	defer close(release)
	p := newTestProxy(t, svc.addr)
	p.setTimeouts(200*time.Millisecond, time.Minute)
	forward(t, p, "GET", "/", "") // the next one reuses the connection
	if res, _ := forward(t, p, "GET", "/", ""); res.Code != http.StatusServiceUnavailable {
		t.Fatalf("hung service: %d; want 503", res.Code)
	}
	if n := requests.Load(); n != 2 {
		t.Fatalf("the service saw %d requests; want 2 (the timed-out one once)", n)
	}
}
