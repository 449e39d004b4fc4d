package proxy

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// service is a real net/http server that counts the connections it accepted.
type service struct {
	srv   *http.Server
	addr  string
	conns atomic.Int64 // connections accepted
	idle  atomic.Int64 // times a connection went idle
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
		}
	}}
	go func() { _ = s.srv.Serve(ln) }()
	t.Cleanup(func() { _ = s.srv.Close() })
	return s
}

func newTestH1(t *testing.T, addr string) *h1Transport {
	t.Helper()
	tr := newH1Transport(addr, 5*time.Second)
	t.Cleanup(tr.CloseIdleConnections)
	return tr
}

func send(t *testing.T, tr http.RoundTripper, method, url, body string) (*http.Response, string) {
	t.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, r)
	if err != nil {
		t.Fatal(err)
	}
	res, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	b, err := io.ReadAll(res.Body)
	res.Body.Close()
	if err != nil {
		t.Fatalf("%s %s: body: %v", method, url, err)
	}
	return res, string(b)
}

func echo(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	w.Header().Set("X-Method", r.Method)
	_, _ = io.WriteString(w, r.Method+" "+r.URL.RequestURI()+" "+string(b))
}

// Requests one after another share one connection, whatever their method,
// body or status.
func TestH1KeepsOneConnection(t *testing.T) {
	svc := startService(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/empty" {
			w.WriteHeader(http.StatusNoContent)
			return
		}
		echo(w, r)
	})
	tr := newTestH1(t, svc.addr)
	base := "http://" + svc.addr
	for i := range 20 {
		switch i % 4 {
		case 0:
			if _, body := send(t, tr, "GET", base+"/a?x=1", ""); body != "GET /a?x=1 " {
				t.Fatalf("GET: %q", body)
			}
		case 1:
			if _, body := send(t, tr, "POST", base+"/token", "grant_type=x"); body != "POST /token grant_type=x" {
				t.Fatalf("POST: %q", body)
			}
		case 2:
			if res, _ := send(t, tr, "HEAD", base+"/a", ""); res.Header.Get("X-Method") != "HEAD" {
				t.Fatalf("HEAD: %v", res.Header)
			}
		case 3:
			if res, _ := send(t, tr, "GET", base+"/empty", ""); res.StatusCode != http.StatusNoContent {
				t.Fatalf("204: %d", res.StatusCode)
			}
		}
	}
	if n := svc.conns.Load(); n != 1 {
		t.Fatalf("%d connections for 20 requests in a row; want 1", n)
	}
}

// A connection the service closed while it was kept is not used: the next
// request, a POST that must not be sent twice, goes on a new connection.
func TestH1DropsConnectionTheServiceClosed(t *testing.T) {
	var posts atomic.Int64
	svc := startService(t, func(w http.ResponseWriter, r *http.Request) {
		if r.Method == "POST" {
			posts.Add(1)
		}
		echo(w, r)
	})
	tr := newTestH1(t, svc.addr)
	base := "http://" + svc.addr
	send(t, tr, "GET", base+"/", "")
	// The answer can reach the client before the server marks the
	// connection idle, and only idle connections are closed below.
	for deadline := time.Now().Add(2 * time.Second); svc.idle.Load() == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the service never marked the kept connection idle")
		}
	}
	svc.srv.SetKeepAlivesEnabled(false) // closes idle connections
	svc.srv.SetKeepAlivesEnabled(true)
	time.Sleep(50 * time.Millisecond) // the FIN arrives
	if _, body := send(t, tr, "POST", base+"/token", "a=b"); body != "POST /token a=b" {
		t.Fatalf("POST after the service closed the kept connection: %q", body)
	}
	if n, p := svc.conns.Load(), posts.Load(); n != 2 || p != 1 {
		t.Fatalf("%d connections, %d POSTs; want 2 and 1", n, p)
	}
}

// flaky answers the first request of each connection and closes the
// connection without answering the second, as a service shutting down
// might: alive() cannot see it coming.
func flaky(t *testing.T) (addr string, requests *atomic.Int64) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	requests = new(atomic.Int64)
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer conn.Close()
				br := bufio.NewReader(conn)
				for i := 0; ; i++ {
					req, err := http.ReadRequest(br)
					if err != nil {
						return
					}
					_, _ = io.Copy(io.Discard, req.Body)
					requests.Add(1)
					if i == 1 {
						return
					}
					_, _ = io.WriteString(conn, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
				}
			}()
		}
	}()
	return ln.Addr().String(), requests
}

// A GET that met a connection closed under it is sent again on a new one;
// a POST whose bytes reached the service is not (the service may have
// acted on it): it fails, as with net/http's Transport.
func TestH1RetriesOnlyWhatMaySafelyBeRepeated(t *testing.T) {
	addr, requests := flaky(t)
	tr := newTestH1(t, addr)
	base := "http://" + addr
	send(t, tr, "GET", base+"/", "")
	if res, body := send(t, tr, "GET", base+"/", ""); res.StatusCode != 200 || body != "ok" {
		t.Fatalf("GET on a connection closed under it: %d %q; want 200 after a retry", res.StatusCode, body)
	}
	if n := requests.Load(); n != 3 {
		t.Fatalf("the service saw %d requests; want 3 (the GET twice)", n)
	}
	// The retried GET's connection has answered once; the next request on
	// it is cut.
	req, _ := http.NewRequest("POST", base+"/token", strings.NewReader("a=b"))
	req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(strings.NewReader("a=b")), nil }
	if res, err := tr.RoundTrip(req); err == nil {
		res.Body.Close()
		t.Fatal("a POST cut after it was sent was sent again")
	}
	if n := requests.Load(); n != 4 {
		t.Fatalf("the service saw %d requests; want 4 (the POST once)", n)
	}
}

// A body closed before its end takes its connection with it; one read to
// the end leaves the connection for the next request.
func TestH1ReusesOnlyAfterTheWholeBody(t *testing.T) {
	big := strings.Repeat("x", 256<<10)
	svc := startService(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/close" {
			w.Header().Set("Connection", "close")
		}
		_, _ = io.WriteString(w, big)
	})
	tr := newTestH1(t, svc.addr)
	base := "http://" + svc.addr

	req, _ := http.NewRequest("GET", base+"/", nil)
	res, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.ReadFull(res.Body, make([]byte, 1000))
	res.Body.Close()
	if n := tr.idleCount(); n != 0 {
		t.Fatalf("%d kept after a body closed early; want 0", n)
	}
	if _, body := send(t, tr, "GET", base+"/", ""); len(body) != len(big) {
		t.Fatalf("body of %d bytes; want %d", len(body), len(big))
	}
	if n := tr.idleCount(); n != 1 {
		t.Fatalf("%d kept after a whole body; want 1", n)
	}
	send(t, tr, "GET", base+"/close", "")
	if n := tr.idleCount(); n != 0 {
		t.Fatalf("%d kept after Connection: close; want 0", n)
	}
	if n := svc.conns.Load(); n != 2 {
		t.Fatalf("%d connections; want 2 (the first closed early, the second closed by the service)", n)
	}
}

// A request whose context ends while the service has not answered returns
// at once with the context's error, and its connection is not kept.
func TestH1CancelUnblocks(t *testing.T) {
	arrived := make(chan struct{}, 1)
	release := make(chan struct{})
	svc := startService(t, func(w http.ResponseWriter, r *http.Request) {
		arrived <- struct{}{}
		<-release
	})
	defer close(release)
	tr := newTestH1(t, svc.addr)
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "GET", "http://"+svc.addr+"/", nil)
	done := make(chan error, 1)
	go func() {
		res, err := tr.RoundTrip(req)
		if err == nil {
			res.Body.Close()
		}
		done <- err
	}()
	<-arrived
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("got %v; want context.Canceled", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("RoundTrip still blocked 5 s after its context ended")
	}
	if n := tr.idleCount(); n != 0 {
		t.Fatalf("%d kept after a cancelled request; want 0", n)
	}
}

// The response header timeout counts from the request's end, and a
// request that timed out is not sent again, even a GET on a kept
// connection: a frozen service would make the client wait twice.
func TestH1HeaderTimeout(t *testing.T) {
	release := make(chan struct{})
	var requests atomic.Int64
	svc := startService(t, func(w http.ResponseWriter, r *http.Request) {
		if requests.Add(1) > 1 {
			<-release
		}
	})
	defer close(release)
	tr := newTestH1(t, svc.addr)
	tr.headerTimeout = 200 * time.Millisecond
	send(t, tr, "GET", "http://"+svc.addr+"/", "") // the next one reuses the connection
	req, _ := http.NewRequest("GET", "http://"+svc.addr+"/", nil)
	start := time.Now()
	_, err := tr.RoundTrip(req)
	took := time.Since(start)
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() || took > 3*time.Second {
		t.Fatalf("got %v after %s; want a timeout after about 200ms", err, took)
	}
	if n := requests.Load(); n != 2 || took >= 400*time.Millisecond {
		t.Fatalf("the service saw %d requests, the caller waited %s; want 2 and one timeout", n, took)
	}
}

// Trailers of a chunked response reach the caller.
func TestH1Trailers(t *testing.T) {
	svc := startService(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Trailer", "Grpc-Status")
		_, _ = io.WriteString(w, "part")
		w.(http.Flusher).Flush()
		w.Header().Set("Grpc-Status", "0")
	})
	tr := newTestH1(t, svc.addr)
	req, _ := http.NewRequest("GET", "http://"+svc.addr+"/", nil)
	res, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if string(b) != "part" || res.Trailer.Get("Grpc-Status") != "0" {
		t.Fatalf("body %q, trailer %v; want part and Grpc-Status 0", b, res.Trailer)
	}
	if n := tr.idleCount(); n != 1 {
		t.Fatalf("%d kept; want 1", n)
	}
}

// Kept connections idle longer than the idle timeout are closed, not
// reused.
func TestH1IdleTimeout(t *testing.T) {
	svc := startService(t, echo)
	tr := newTestH1(t, svc.addr)
	tr.idleTimeout = 50 * time.Millisecond
	base := "http://" + svc.addr
	send(t, tr, "GET", base+"/", "")
	time.Sleep(100 * time.Millisecond)
	send(t, tr, "GET", base+"/", "")
	if n := svc.conns.Load(); n != 2 {
		t.Fatalf("%d connections; want 2 (the idle one was not reused)", n)
	}
}

// Concurrent requests each get a connection of their own and all come
// back to the pool.
func TestH1Concurrent(t *testing.T) {
	svc := startService(t, echo)
	tr := newTestH1(t, svc.addr)
	base := "http://" + svc.addr
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 50 {
				body := strings.Repeat("b", i+1)
				req, _ := http.NewRequest("POST", base+"/", strings.NewReader(body))
				res, err := tr.RoundTrip(req)
				if err != nil {
					t.Error(err)
					return
				}
				got, _ := io.ReadAll(res.Body)
				res.Body.Close()
				if string(got) != "POST / "+body {
					t.Errorf("got %q", got)
					return
				}
			}
		}()
	}
	wg.Wait()
	if n := svc.conns.Load(); n > 16 {
		t.Fatalf("%d connections for 16 concurrent callers; want at most 16", n)
	}
}

// A service may answer before it has read the body (a 400, 405 or 413 for
// a request it refuses) and close the connection; writing the rest then
// fails. That answer is the response, as net/http's Transport returns it,
// never a transport error: an anonymous client sending large bodies to
// such a route would otherwise count as the service failing and open
// edge's breaker for everyone.
func TestH1EarlyAnswerIsTheResponse(t *testing.T) {
	svc := startService(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Connection", "close")
		http.Error(w, "refused without reading the body", http.StatusBadRequest)
	})
	tr := newTestH1(t, svc.addr)
	big := strings.Repeat("x", 8<<20)
	for _, streamed := range []bool{false, true} {
		for i := range 2 {
			var body io.Reader = strings.NewReader(big)
			if streamed {
				body = io.NopCloser(body) // no GetBody: written as it is read
			}
			req, err := http.NewRequest(http.MethodPost, "http://"+svc.addr+"/", body)
			if err != nil {
				t.Fatal(err)
			}
			res, err := tr.RoundTrip(req)
			if err != nil {
				t.Fatalf("streamed %v, request %d: %v; want the service's early 400", streamed, i, err)
			}
			b, _ := io.ReadAll(res.Body)
			res.Body.Close()
			if res.StatusCode != http.StatusBadRequest || !strings.Contains(string(b), "refused") {
				t.Fatalf("streamed %v, request %d: %d %q; want the service's 400", streamed, i, res.StatusCode, b)
			}
		}
	}
}
