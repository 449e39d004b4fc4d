package proxy

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/gatehouse-id/gatehouse/pkg/rpc"
	"github.com/gatehouse-id/gatehouse/pkg/testutil"
	"github.com/gatehouse-id/gatehouse/services/edge/internal/edgetest"
	"github.com/gatehouse-id/gatehouse/services/edge/internal/reqinfo"
)

// newEdge starts backend behind a real h2c server, a Proxy to it behind
// another, and returns the proxy's URL.
func newEdge(t *testing.T, backend http.Handler, logger *slog.Logger, wrap func(http.Handler) http.Handler) (*url.URL, *edgetest.Server) {
	t.Helper()
	be := edgetest.Start(t, backend)
	p, err := New(be.URL, "tokens", logger)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(p.CloseIdleConnections)
	var h http.Handler = p
	if wrap != nil {
		h = wrap(p)
	}
	return edgetest.Start(t, h).URL, be
}

func jsonLogger(buf *bytes.Buffer) *slog.Logger {
	return slog.New(slog.NewJSONHandler(buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

func TestNewRejectsBadTargets(t *testing.T) {
	for _, raw := range []string{"", "ftp://a", "http://", "http://a?x=1", "/relative"} {
		u, _ := url.Parse(raw)
		if raw == "" {
			u = nil
		}
		if _, err := New(u, "tokens", nil); err == nil {
			t.Errorf("New(%q): got nil error; want rejection", raw)
		}
	}
	if _, err := New(&url.URL{Scheme: "http", Host: "a"}, "", nil); err == nil {
		t.Error("New with empty service name: got nil error")
	}
}

func TestGRPCTrailersOverH2C(t *testing.T) {
	backend := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ProtoMajor != 2 || r.Header.Get("Te") != "trailers" {
			w.WriteHeader(http.StatusTeapot)
			return
		}
		msg, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/grpc")
		w.Header().Set("Trailer", "Grpc-Status, Grpc-Message")
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(msg) // echo the frame
		w.Header().Set("Grpc-Status", "0")
		w.Header().Set("Grpc-Message", "ok")
	})
	edge, _ := newEdge(t, backend, nil, nil)
	frame := []byte{0, 0, 0, 0, 3, 'a', 'b', 'c'}

	for name, client := range map[string]*http.Client{"h2c": edgetest.H2CClient(t), "http1": edgetest.HTTP1Client(t)} {
		t.Run(name, func(t *testing.T) {
			req, _ := http.NewRequest(http.MethodPost, edge.String()+"/gatehouse.admin.v1.AdminService/RotateKeys", bytes.NewReader(frame))
			req.Header.Set("Content-Type", "application/grpc")
			req.Header.Set("Te", "trailers")
			resp, body := edgetest.Do(t, client, req)
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("got status %d; want 200", resp.StatusCode)
			}
			if !bytes.Equal(body, frame) {
				t.Fatalf("got body %x; want %x", body, frame)
			}
			if got := resp.Trailer.Get("Grpc-Status"); got != "0" {
				t.Fatalf("got trailer Grpc-Status %q (trailers %v, header %v, te %v); want 0", got, resp.Trailer, resp.Header, resp.TransferEncoding)
			}
			if got := resp.Trailer.Get("Grpc-Message"); got != "ok" {
				t.Fatalf("got trailer Grpc-Message %q; want ok", got)
			}
		})
	}
}

func TestServerStreamingIsNotBuffered(t *testing.T) {
	firstRead := make(chan struct{})
	backend := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "first\n")
		http.NewResponseController(w).Flush()
		select {
		case <-firstRead:
		case <-r.Context().Done():
			return
		}
		_, _ = io.WriteString(w, "second\n")
	})
	edge, _ := newEdge(t, backend, nil, nil)

	for name, client := range map[string]*http.Client{"h2c": edgetest.H2CClient(t), "http1": edgetest.HTTP1Client(t)} {
		t.Run(name, func(t *testing.T) {
			firstRead = make(chan struct{})
			// The deadline only turns a buffering proxy's deadlock into a failure.
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, edge.String()+"/oauth/v2/keys", nil)
			resp, err := client.Do(req)
			if err != nil {
				t.Fatalf("request: %v", err)
			}
			defer resp.Body.Close()
			br := bufio.NewReader(resp.Body)
			line, err := br.ReadString('\n')
			if err != nil || line != "first\n" {
				t.Fatalf("got first chunk %q, %v; want \"first\\n\" while the backend waits", line, err)
			}
			close(firstRead)
			rest, err := io.ReadAll(br)
			if err != nil || string(rest) != "second\n" {
				t.Fatalf("got rest %q, %v; want \"second\\n\"", rest, err)
			}
		})
	}
}

// TestBackendProtocol: gRPC reaches the service over h2c, everything else
// (gRPC-web and Connect included) over HTTP/1.1, whatever the client spoke.
func TestBackendProtocol(t *testing.T) {
	backend := &edgetest.Backend{Name: "tokens"}
	edge, _ := newEdge(t, backend, nil, nil)
	for _, c := range []struct {
		name, contentType string
		client            *http.Client
		wantMajor         int
	}{
		{"form over HTTP/1.1", "application/x-www-form-urlencoded", edgetest.HTTP1Client(t), 1},
		{"form over h2c", "application/x-www-form-urlencoded", edgetest.H2CClient(t), 1},
		{"connect", "application/proto", edgetest.H2CClient(t), 1},
		{"grpc-web", "application/grpc-web+proto", edgetest.HTTP1Client(t), 1},
		{"grpc", "application/grpc", edgetest.HTTP1Client(t), 2},
		{"grpc+proto", "application/grpc+proto", edgetest.H2CClient(t), 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			req, _ := http.NewRequest(http.MethodPost, edge.String()+"/oauth/v2/token?x=1", strings.NewReader("grant_type=client_credentials"))
			req.Header.Set("Content-Type", c.contentType)
			resp, body := edgetest.Do(t, c.client, req)
			if resp.StatusCode != http.StatusOK || string(body) != "tokens" {
				t.Fatalf("got %d %q; want 200 \"tokens\"", resp.StatusCode, body)
			}
			got := backend.Last(t)
			if got.ProtoMajor != c.wantMajor {
				t.Fatalf("backend got %s; want HTTP/%d", got.Proto, c.wantMajor)
			}
			if got.Path != "/oauth/v2/token" || got.RawQuery != "x=1" || string(got.Body) != "grant_type=client_credentials" {
				t.Fatalf("backend got path %q query %q body %q; want the request unchanged", got.Path, got.RawQuery, got.Body)
			}
		})
	}
}

// TestIsGRPC pins which content types need HTTP/2.
func TestIsGRPC(t *testing.T) {
	for ct, want := range map[string]bool{
		"application/grpc": true, "application/grpc+proto": true, "application/grpc;charset=utf-8": true, "Application/GRPC": true,
		"application/grpc-web": false, "application/grpc-web-text+proto": false, "application/grpcx": false,
		"application/json": false, "": false,
	} {
		if got := isGRPC(ct); got != want {
			t.Errorf("isGRPC(%q) = %v; want %v", ct, got, want)
		}
	}
}

func TestStoppedBackendAnswers503(t *testing.T) {
	var logs bytes.Buffer
	edge, be := newEdge(t, &edgetest.Backend{Name: "tokens"}, jsonLogger(&logs), nil)
	be.Stop()

	req, _ := http.NewRequest(http.MethodGet, edge.String()+"/oauth/v2/authorize?code=SECRETCODE", nil)
	resp, body := edgetest.Do(t, edgetest.HTTP1Client(t), req)
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("got status %d; want 503", resp.StatusCode)
	}
	if got := resp.Header.Get("Retry-After"); got != "5" {
		t.Fatalf("got Retry-After %q; want 5", got)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Fatalf("got Content-Type %q; want application/json", ct)
	}
	var e map[string]string
	if err := json.Unmarshal(body, &e); err != nil {
		t.Fatalf("body %q: %v", body, err)
	}
	if e["error"] != "temporarily_unavailable" || e["error_description"] != "tokens service unavailable" {
		t.Fatalf("got body %v; want temporarily_unavailable / tokens service unavailable", e)
	}
	if !strings.Contains(logs.String(), `"level":"WARN"`) || !strings.Contains(logs.String(), `"service":"tokens"`) {
		t.Fatalf("got logs %q; want a warn line naming the service", logs.String())
	}
	if strings.Contains(logs.String(), "SECRETCODE") {
		t.Fatalf("logs leak the query string: %s", logs.String())
	}
}

func TestForwardedHeaders(t *testing.T) {
	backend := &edgetest.Backend{Name: "tokens"}

	t.Run("untrusted", func(t *testing.T) {
		edge, _ := newEdge(t, backend, nil, nil)
		req, _ := http.NewRequest(http.MethodGet, edge.String()+"/oauth/v2/keys", nil)
		req.Header.Set("X-Forwarded-For", "203.0.113.9")
		req.Header.Set("X-Forwarded-Proto", "https")
		req.Header.Set("Forwarded", "for=203.0.113.9")
		req.Header.Set("X-Real-Ip", "203.0.113.9")
		req.Header.Set("X-Request-Id", "req-123")
		edgetest.Do(t, edgetest.HTTP1Client(t), req)
		got := backend.Last(t)
		if xff := got.Header.Values("X-Forwarded-For"); len(xff) != 1 || xff[0] != "127.0.0.1" {
			t.Errorf("got X-Forwarded-For %q; want only the peer 127.0.0.1", xff)
		}
		if p := got.Header.Get("X-Forwarded-Proto"); p != "http" {
			t.Errorf("got X-Forwarded-Proto %q; want http", p)
		}
		if h := got.Header.Get("X-Forwarded-Host"); h != edge.Host {
			t.Errorf("got X-Forwarded-Host %q; want %q", h, edge.Host)
		}
		if got.Header.Get("Forwarded") != "" || got.Header.Get("X-Real-Ip") != "" {
			t.Errorf("spoofable headers passed: Forwarded %q X-Real-Ip %q", got.Header.Get("Forwarded"), got.Header.Get("X-Real-Ip"))
		}
		if id := got.Header.Get("X-Request-Id"); id != "req-123" {
			t.Errorf("got X-Request-Id %q; want req-123", id)
		}
	})

	t.Run("trusted", func(t *testing.T) {
		trust := func(h http.Handler) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				info := &reqinfo.Info{RequestID: "r", ClientAddr: "203.0.113.9", PeerTrusted: true}
				h.ServeHTTP(w, r.WithContext(reqinfo.NewContext(r.Context(), info)))
			})
		}
		edge, _ := newEdge(t, backend, nil, trust)
		req, _ := http.NewRequest(http.MethodGet, edge.String()+"/oauth/v2/keys", nil)
		req.Header.Set("X-Forwarded-For", "203.0.113.9, 10.0.0.2")
		req.Header.Set("X-Forwarded-Proto", "https")
		req.Header.Set("X-Forwarded-Host", "id.example.com")
		edgetest.Do(t, edgetest.HTTP1Client(t), req)
		got := backend.Last(t)
		if xff := strings.Join(got.Header.Values("X-Forwarded-For"), ", "); xff != "203.0.113.9, 10.0.0.2, 127.0.0.1" {
			t.Errorf("got X-Forwarded-For %q; want the chain plus the peer", xff)
		}
		if p := got.Header.Get("X-Forwarded-Proto"); p != "https" {
			t.Errorf("got X-Forwarded-Proto %q; want https from the trusted proxy", p)
		}
		if h := got.Header.Get("X-Forwarded-Host"); h != "id.example.com" {
			t.Errorf("got X-Forwarded-Host %q; want id.example.com", h)
		}
	})
}

// TestEdgeProof: the proof goes with the address the router resolved, and
// only then; a client's own proof never passes.
func TestEdgeProof(t *testing.T) {
	const token = "proxy-test-internal-token-0123456789"
	backend := &edgetest.Backend{Name: "authn"}
	be := edgetest.Start(t, backend)
	p, err := New(be.URL, "authn", nil, WithInternalToken(token))
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(p.CloseIdleConnections)
	routed := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		info := &reqinfo.Info{RequestID: "r-1", ClientAddr: "203.0.113.9"}
		p.ServeHTTP(w, r.WithContext(reqinfo.NewContext(r.Context(), info)))
	})
	send := func(h http.Handler) edgetest.Request {
		req, _ := http.NewRequest(http.MethodGet, edgetest.Start(t, h).URL.String()+"/ui/login", nil)
		req.Header.Set("Gatehouse-Edge-Proof", "forged")
		req.Header.Set("X-Real-Ip", "198.51.100.1")
		req.Header.Set("Connection", "X-Real-Ip, X-Request-Id")
		edgetest.Do(t, edgetest.HTTP1Client(t), req)
		return backend.Last(t)
	}
	got := send(routed)
	if v := got.Header.Get("Gatehouse-Edge-Proof"); v != rpc.EdgeProof(token) {
		t.Errorf("routed: proof %q; want rpc.EdgeProof(token)", v)
	}
	if v, id := got.Header.Get("X-Real-Ip"), got.Header.Get("X-Request-Id"); v != "203.0.113.9" || id != "r-1" {
		t.Errorf("routed: X-Real-Ip %q, X-Request-Id %q; want reqinfo's 203.0.113.9 and r-1", v, id)
	}
	got = send(p)
	if v := got.Header.Get("Gatehouse-Edge-Proof"); v != "" {
		t.Errorf("without the router: proof %q; want none", v)
	}
}

func TestTraceContextPropagatedWithoutQueryInSpans(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	prevTP, prevProp := otel.GetTracerProvider(), otel.GetTextMapPropagator()
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagation.TraceContext{})
	t.Cleanup(func() {
		otel.SetTracerProvider(prevTP)
		otel.SetTextMapPropagator(prevProp)
		_ = tp.Shutdown(context.Background())
	})

	backend := &edgetest.Backend{Name: "authn"}
	edge, _ := newEdge(t, backend, nil, nil)
	req, _ := http.NewRequest(http.MethodGet, edge.String()+"/idps/callback?code=SECRETCODE&state=s", nil)
	resp, _ := edgetest.Do(t, edgetest.H2CClient(t), req)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("got status %d; want 200", resp.StatusCode)
	}
	got := backend.Last(t)
	if got.RawQuery != "code=SECRETCODE&state=s" {
		t.Fatalf("backend got query %q; want it intact", got.RawQuery)
	}
	spans := rec.Ended()
	if len(spans) != 1 {
		t.Fatalf("got %d spans; want 1 client span", len(spans))
	}
	span := spans[0]
	tp0 := got.Header.Get("Traceparent")
	if !strings.Contains(tp0, span.SpanContext().TraceID().String()) {
		t.Fatalf("got traceparent %q; want trace id %s", tp0, span.SpanContext().TraceID())
	}
	for _, a := range span.Attributes() {
		if strings.Contains(a.Value.String(), "SECRETCODE") {
			t.Fatalf("span attribute %s leaks the query: %s", a.Key, a.Value.String())
		}
	}
}

func TestBodyLimitErrorIs413(t *testing.T) {
	limit := func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			r.Body = http.MaxBytesReader(w, r.Body, 10)
			h.ServeHTTP(w, r)
		})
	}
	edge, _ := newEdge(t, &edgetest.Backend{Name: "tokens"}, nil, limit)
	// No Content-Length: the proxy only learns the size while streaming.
	body := io.MultiReader(strings.NewReader(strings.Repeat("x", 64))) // hides the length
	req, _ := http.NewRequest(http.MethodPost, edge.String()+"/oauth/v2/token", body)
	resp, _ := edgetest.Do(t, edgetest.H2CClient(t), req)
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("got status %d; want 413", resp.StatusCode)
	}
}

func TestClientGoneIsNotAWarning(t *testing.T) {
	logs := &testutil.SyncBuffer{}
	arrived := make(chan struct{})
	backend := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(arrived)
		<-r.Context().Done()
	})
	edge, _ := newEdge(t, backend, slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})), nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, edge.String()+"/oauth/v2/keys", nil)
	done := make(chan error, 1)
	go func() {
		resp, err := edgetest.H2CClient(t).Do(req)
		if err == nil {
			resp.Body.Close()
		}
		done <- err
	}()
	<-arrived
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v; want context.Canceled", err)
	}
	// The proxy notices the cancellation asynchronously; wait for its line.
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(logs.String(), "client went away") {
		if time.Now().After(deadline) {
			t.Fatalf("no debug line about the client going away; logs: %s", logs.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if strings.Contains(logs.String(), `"level":"WARN"`) {
		t.Fatalf("a client that went away was logged as an outage: %s", logs.String())
	}
}

// TestHungServiceTimesOutThenFailsFast: a frozen service (it accepts but
// never answers) costs a client the response header timeout, not the
// freeze; after repeated failures the breaker answers 503 with
// Retry-After at once, without calling the service, and a probe closes it
// once the service answers again.
func TestHungServiceTimesOutThenFailsFast(t *testing.T) {
	var hits atomic.Int32
	var hung atomic.Bool
	hung.Store(true)
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	be := edgetest.Start(t, &edgetest.Backend{Name: "tokens", Respond: func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		if hung.Load() {
			select {
			case <-release:
			case <-r.Context().Done():
			}
			return
		}
		w.WriteHeader(http.StatusOK)
	}})
	p, err := New(be.URL, "tokens", slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	p.setTimeouts(200*time.Millisecond, 500*time.Millisecond)
	t.Cleanup(p.CloseIdleConnections)
	edge := edgetest.Start(t, p).URL
	get := func() (*http.Response, time.Duration) {
		start := time.Now()
		req, _ := http.NewRequest(http.MethodGet, edge.String()+"/oauth/v2/keys", nil)
		resp, _ := edgetest.Do(t, edgetest.HTTP1Client(t), req)
		return resp, time.Since(start)
	}
	for i := 0; i < breakerFailures; i++ {
		resp, took := get()
		if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" || took > 2*time.Second {
			t.Fatalf("hung call %d: %d Retry-After %q after %s; want 503 with Retry-After after ~200ms", i, resp.StatusCode, resp.Header.Get("Retry-After"), took)
		}
	}
	before := hits.Load()
	resp, took := get()
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" || took > 100*time.Millisecond || hits.Load() != before {
		t.Fatalf("with the breaker open: %d after %s, service called %d more times; want 503 at once without a call", resp.StatusCode, took, hits.Load()-before)
	}
	// The service recovers; after the open time one probe closes the breaker.
	hung.Store(false)
	time.Sleep(600 * time.Millisecond)
	for i := 0; i < 3; i++ {
		if resp, _ := get(); resp.StatusCode != http.StatusOK {
			t.Fatalf("after recovery, call %d: %d; want 200", i, resp.StatusCode)
		}
	}
}

// A service that is ready again is sent requests at once: the open
// breaker asks its /readyz and closes when it answers 200, long before the
// open time would let a probe request through (here a minute).
func TestReadyServiceClosesTheBreaker(t *testing.T) {
	var down atomic.Bool
	down.Store(true)
	var readyAsked atomic.Int32
	be := edgetest.Start(t, &edgetest.Backend{Name: "tokens", Respond: func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/readyz" {
			readyAsked.Add(1)
		}
		if down.Load() {
			// As a process whose port refuses: the connection is closed
			// without an answer, a transport error.
			if hj, ok := w.(http.Hijacker); ok {
				if c, _, err := hj.Hijack(); err == nil {
					c.Close()
					return
				}
			}
		}
		w.WriteHeader(http.StatusOK)
	}})
	p, err := New(be.URL, "tokens", slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	p.setTimeouts(time.Second, time.Minute)
	t.Cleanup(p.CloseIdleConnections)
	edge := edgetest.Start(t, p).URL
	get := func() int {
		req, _ := http.NewRequest(http.MethodGet, edge.String()+"/oauth/v2/keys", nil)
		resp, _ := edgetest.Do(t, edgetest.HTTP1Client(t), req)
		return resp.StatusCode
	}
	for i := 0; i < breakerFailures+2; i++ {
		if status := get(); status != http.StatusServiceUnavailable {
			t.Fatalf("failing service, call %d: %d; want 503", i, status)
		}
	}
	down.Store(false)
	recovered := time.Now()
	for get() != http.StatusOK {
		if time.Since(recovered) > 10*time.Second {
			t.Fatalf("the breaker stayed open %v after the service was ready (readyz asked %d times)", time.Since(recovered), readyAsked.Load())
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("requests passed %v after the service was ready", time.Since(recovered).Round(time.Millisecond))
}

// A small body is sent on with the request's header in one write, even
// when the client sends it late: the service reads the whole request at
// once instead of waking a second time for the body.
func TestSmallBodyGoesWithTheHeader(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	first := make(chan string, 1)
	go func() {
		conn, err := ln.Accept()
		if err != nil {
			return
		}
		defer conn.Close()
		_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
		buf := make([]byte, 64<<10)
		n, _ := conn.Read(buf) // one read: what the first write carried
		first <- string(buf[:n])
		_, _ = io.WriteString(conn, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
	}()
	target, _ := url.Parse("http://" + ln.Addr().String())
	p, err := New(target, "tokens", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.CloseIdleConnections)
	edge := edgetest.Start(t, p).URL

	conn, err := net.Dial("tcp", edge.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	const body = "grant_type=client_credentials"
	_, _ = fmt.Fprintf(conn, "POST /oauth/v2/token HTTP/1.1\r\nHost: %s\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: %d\r\n\r\n", edge.Host, len(body))
	time.Sleep(50 * time.Millisecond) // the body comes in a later segment
	_, _ = io.WriteString(conn, body)
	got := <-first
	if !strings.HasPrefix(got, "POST /oauth/v2/token ") || !strings.HasSuffix(got, "\r\n\r\n"+body) {
		t.Fatalf("the service's first read got %q; want the header and the body together", got)
	}
	res, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil || res.StatusCode != 200 {
		t.Fatalf("response %v, %v; want 200", res, err)
	}
}

// A body cut short by the client never reaches the service as a whole
// request.
func TestCutBodyIsNotSentAsComplete(t *testing.T) {
	backend := &edgetest.Backend{Name: "tokens"}
	edge, _ := newEdge(t, backend, nil, nil)
	conn, err := net.Dial("tcp", edge.Host)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = fmt.Fprintf(conn, "POST /oauth/v2/token HTTP/1.1\r\nHost: %s\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: 100\r\n\r\nclient_id=", edge.Host)
	time.Sleep(50 * time.Millisecond)
	conn.Close()
	time.Sleep(200 * time.Millisecond)
	for _, r := range backend.Requests() {
		if r.BodyErr == nil {
			t.Fatalf("the service got a complete request from a cut body: %q", r.Body)
		}
	}
}
