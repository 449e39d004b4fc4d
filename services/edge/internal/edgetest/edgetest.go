package edgetest

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"sync"
	"testing"
	"time"
)

// Protocols returns HTTP/1.1 plus h2c, what edge and the services serve.
func Protocols() *http.Protocols {
	p := new(http.Protocols)
	p.SetHTTP1(true)
	p.SetUnencryptedHTTP2(true)
	return p
}

// Server is a running HTTP/1.1 + h2c server on 127.0.0.1.
type Server struct {
	URL *url.URL
	srv *http.Server
	ln  net.Listener
}

// Start serves h on a fresh 127.0.0.1 port until the test ends.
func Start(t testing.TB, h http.Handler) *Server {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	s := &Server{
		URL: &url.URL{Scheme: "http", Host: ln.Addr().String()},
		srv: &http.Server{Handler: h, Protocols: Protocols(), ReadHeaderTimeout: 10 * time.Second},
		ln:  ln,
	}
	go func() {
		if err := s.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("serve: %v", err)
		}
	}()
	t.Cleanup(s.Stop)
	return s
}

// Stop closes the listener and every connection; later dials are refused.
func (s *Server) Stop() { _ = s.srv.Close() }

// H2CClient speaks HTTP/2 cleartext with prior knowledge, like a gRPC client.
func H2CClient(t testing.TB) *http.Client {
	p := new(http.Protocols)
	p.SetUnencryptedHTTP2(true)
	tr := &http.Transport{Protocols: p}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

// HTTP1Client speaks HTTP/1.1 only, like a browser's REST or gRPC-web call.
func HTTP1Client(t testing.TB) *http.Client {
	p := new(http.Protocols)
	p.SetHTTP1(true)
	tr := &http.Transport{Protocols: p}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

// Request is what a Backend saw.
type Request struct {
	Proto      string
	ProtoMajor int
	Method     string
	Path       string
	RawQuery   string
	Host       string
	RemoteAddr string
	Header     http.Header
	Body       []byte
	BodyErr    error
}

// Backend records every request and answers 200 with the header
// X-Backend: Name and the body "Name". Set Respond to answer differently
// (it runs after the request was recorded; the body is already read).
type Backend struct {
	Name    string
	Respond func(w http.ResponseWriter, r *http.Request)

	mu   sync.Mutex
	reqs []Request
}

// ServeHTTP implements http.Handler.
func (b *Backend) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	b.mu.Lock()
	b.reqs = append(b.reqs, Request{
		Proto: r.Proto, ProtoMajor: r.ProtoMajor, Method: r.Method, Path: r.URL.Path,
		RawQuery: r.URL.RawQuery, Host: r.Host, RemoteAddr: r.RemoteAddr,
		Header: r.Header.Clone(), Body: body, BodyErr: err,
	})
	b.mu.Unlock()
	if b.Respond != nil {
		b.Respond(w, r)
		return
	}
	if err != nil {
		http.Error(w, "bad body", http.StatusBadRequest)
		return
	}
	w.Header().Set("X-Backend", b.Name)
	_, _ = io.WriteString(w, b.Name)
}

// Requests returns a copy of what was received so far.
func (b *Backend) Requests() []Request {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]Request(nil), b.reqs...)
}

// Last returns the last request, failing the test when there was none.
func (b *Backend) Last(t testing.TB) Request {
	t.Helper()
	reqs := b.Requests()
	if len(reqs) == 0 {
		t.Fatalf("backend %s received no request", b.Name)
	}
	return reqs[len(reqs)-1]
}

// Reset forgets recorded requests.
func (b *Backend) Reset() {
	b.mu.Lock()
	b.reqs = nil
	b.mu.Unlock()
}

// Do sends req with a deadline so a broken stream fails the test instead of
// hanging it; the body is read and closed.
func Do(t testing.TB, c *http.Client, req *http.Request) (*http.Response, []byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(req.Context(), 30*time.Second)
	defer cancel()
	resp, err := c.Do(req.WithContext(ctx))
	if err != nil {
		t.Fatalf("%s %s: %v", req.Method, req.URL.Path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: read body: %v", req.Method, req.URL.Path, err)
	}
	return resp, body
}

// ClosedAddr returns a 127.0.0.1 address nothing listens on.
func ClosedAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	return addr
}

// Hammer sends the requests newRequest makes from b.RunParallel's
// goroutines over keep-alive connections until b.N are answered, failing b
// on any error or status other than 200: the load loop of edge's
// benchmarks.
func Hammer(b *testing.B, newRequest func() *http.Request) {
	b.Helper()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	defer client.CloseIdleConnections()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			res, err := client.Do(newRequest())
			if err != nil {
				b.Error(err)
				return
			}
			_, _ = io.Copy(io.Discard, res.Body)
			res.Body.Close()
			if res.StatusCode != http.StatusOK {
				b.Errorf("status %d", res.StatusCode)
				return
			}
		}
	})
}
