package proxy

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/gatehouse-id/gatehouse/pkg/rpc"
	"github.com/gatehouse-id/gatehouse/pkg/telemetry"
	"github.com/gatehouse-id/gatehouse/services/edge/internal/apierror"
	"github.com/gatehouse-id/gatehouse/services/edge/internal/reqinfo"
)

// RetryAfterSeconds is the hint sent with a 503 for an unreachable service:
// long enough for a restarted pod to become ready, short for a client.
const RetryAfterSeconds = 5

// StatusClientClosedRequest is logged (nginx's 499) when the client went away
// before the service answered; nobody reads the response.
const StatusClientClosedRequest = 499

// Proxy is an http.Handler forwarding to one service.
type Proxy struct {
	svc    string
	target *url.URL
	logger *slog.Logger
	rp     *httputil.ReverseProxy
	h1     *http.Transport // everything but gRPC to an https service
	h2     *http.Transport // gRPC
	// sync replaces h1 for an http service (see h1Transport).
	sync *h1Transport
	// breaker fails fast while the service keeps failing.
	breaker *breakerTransport
	// whole is the largest request body read whole (wholeBody; 0 in the
	// A/B benchmark of streaming every body).
	whole int64
	// proof is rpc.EdgeProof of the internal token: the service believes
	// the X-Real-Ip of a request that carries it. Empty: none is sent.
	proof string
}

// Option configures New.
type Option func(*Proxy)

// WithInternalToken makes the proxy prove to the service, with
// rpc.EdgeProof(token), that the client address it forwards is edge's.
func WithInternalToken(token string) Option {
	return func(p *Proxy) { p.proof = rpc.EdgeProof(token) }
}

// setTimeouts changes the response header timeout and the breaker's open
// time (tests).
func (p *Proxy) setTimeouts(header, open time.Duration) {
	p.h1.ResponseHeaderTimeout, p.h2.ResponseHeaderTimeout = header, header
	if p.sync != nil {
		p.sync.headerTimeout = header
	}
	p.breaker = newBreaker(p.svc, p.breaker.next, open, p.breaker.ready, p.logger)
	p.rp.Transport = p.breaker
}

var _ http.Handler = (*Proxy)(nil)

// New returns a proxy to target (an absolute http or https URL; its path, if
// any, prefixes the request path) for the service named svc, which appears in
// logs and in the 503 description. A nil logger means slog.Default().
func New(target *url.URL, svc string, logger *slog.Logger, opts ...Option) (*Proxy, error) {
	if target == nil {
		return nil, errors.New("proxy: nil target URL")
	}
	if target.Scheme != "http" && target.Scheme != "https" {
		return nil, fmt.Errorf("proxy: target %q for %s: scheme must be http or https", target.Redacted(), svc)
	}
	if target.Host == "" {
		return nil, fmt.Errorf("proxy: target %q for %s: missing host", target.Redacted(), svc)
	}
	if target.RawQuery != "" || target.Fragment != "" {
		return nil, fmt.Errorf("proxy: target %q for %s: must not carry a query or fragment", target.Redacted(), svc)
	}
	if svc == "" {
		return nil, errors.New("proxy: empty service name")
	}
	if logger == nil {
		logger = slog.Default()
	}
	p := &Proxy{svc: svc, target: target, logger: logger, h1: newTransport(target.Scheme, false), h2: newTransport(target.Scheme, true), whole: wholeBody}
	for _, o := range opts {
		o(p)
	}
	var h1 http.RoundTripper = p.h1
	if target.Scheme == "http" {
		p.sync = newH1Transport(hostPort(target), ResponseHeaderTimeout)
		h1 = p.sync
	}
	p.breaker = newBreaker(svc, byProtocol{h1: h1, h2: p.h2}, breakerOpen, target.JoinPath("readyz").String(), logger)
	p.rp = &httputil.ReverseProxy{
		Rewrite: p.rewrite,
		Transport: telemetry.HTTPTransport(p.breaker, func(r *http.Request) string {
			return "edge→" + svc + " " + r.Method
		}),
		// No periodic flushing: ReverseProxy flushes every write at once
		// for a response of unknown length (gRPC and Connect streams,
		// chunked bodies) and for text/event-stream, so streams still pass
		// unbuffered, while a response with a Content-Length is not
		// flushed once per copied chunk.
		FlushInterval:  0,
		BufferPool:     bufferPool{},
		ModifyResponse: keepTrailers,
		ErrorHandler:   p.handleError,
		ErrorLog:       slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}
	return p, nil
}

// newTransport returns the transport to a service: HTTP/1.1 keep-alive, or
// with http2 prior-knowledge h2c (HTTP/2 over TLS for https targets). An
// http service's HTTP/1.1 traffic goes through h1Transport instead.
//
// HTTP/1.1 is the default because Go's HTTP/2 server costs about three
// times the CPU per request of its HTTP/1.1 server (measured: the tokens
// service answered the key set for 0.110 ms of CPU over h2c, 0.036 ms over
// HTTP/1.1), and edge forwards mostly small unary requests. gRPC needs
// HTTP/2 end to end (trailers, full duplex), so it keeps h2c.
func newTransport(scheme string, http2 bool) *http.Transport {
	protocols := new(http.Protocols)
	switch {
	case !http2:
		protocols.SetHTTP1(true)
	case scheme == "https":
		protocols.SetHTTP2(true)
	default:
		protocols.SetUnencryptedHTTP2(true)
	}
	return &http.Transport{
		// Never route internal traffic through HTTP_PROXY from the environment.
		Proxy:     nil,
		Protocols: protocols,
		DialContext: (&net.Dialer{
			Timeout:   5 * time.Second,
			KeepAlive: 30 * time.Second,
		}).DialContext,
		TLSHandshakeTimeout:   10 * time.Second,
		ResponseHeaderTimeout: ResponseHeaderTimeout,
		IdleConnTimeout:       90 * time.Second,
		// HTTP/1.1 carries one request per connection at a time: keep as
		// many idle as edge has requests in flight to the service.
		MaxIdleConnsPerHost: 256,
		// Pass Accept-Encoding and compressed bodies through untouched.
		DisableCompression: true,
		HTTP2: &http.HTTP2Config{
			// Ping an idle connection so one to a vanished pod is noticed
			// and dropped instead of hanging the next request.
			SendPingTimeout: 30 * time.Second,
			PingTimeout:     15 * time.Second,
		},
	}
}

// byProtocol sends gRPC (application/grpc and application/grpc+codec, not
// gRPC-web, which is made for HTTP/1.1) over HTTP/2 and the rest over
// HTTP/1.1.
type byProtocol struct{ h1, h2 http.RoundTripper }

func (t byProtocol) RoundTrip(r *http.Request) (*http.Response, error) {
	if isGRPC(r.Header.Get("Content-Type")) {
		return t.h2.RoundTrip(r)
	}
	return t.h1.RoundTrip(r)
}

func isGRPC(contentType string) bool {
	const prefix = "application/grpc" // media types are case-insensitive
	if len(contentType) < len(prefix) || !strings.EqualFold(contentType[:len(prefix)], prefix) {
		return false
	}
	rest := contentType[len(prefix):]
	return rest == "" || rest[0] == '+' || rest[0] == ';'
}

// bufferPool recycles ReverseProxy's copy buffers, which it would
// otherwise allocate (32 KiB, zeroed) for every response.
type bufferPool struct{}

var copyBuffers = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

func (bufferPool) Get() []byte  { return *copyBuffers.Get().(*[]byte) }
func (bufferPool) Put(b []byte) { copyBuffers.Put(&b) }

// ServeHTTP implements http.Handler.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) { p.rp.ServeHTTP(w, r) }

// CloseIdleConnections closes idle connections to the service, for shutdown.
func (p *Proxy) CloseIdleConnections() {
	p.h1.CloseIdleConnections()
	if p.sync != nil {
		p.sync.CloseIdleConnections()
	}
	p.h2.CloseIdleConnections()
}

func (p *Proxy) rewrite(pr *httputil.ProxyRequest) {
	pr.SetURL(p.target)
	info := reqinfo.FromContext(pr.In.Context())
	trusted := info != nil && info.PeerTrusted
	if trusted {
		// Append the peer to the chain the trusted proxy built.
		if v := pr.In.Header.Values("X-Forwarded-For"); len(v) > 0 {
			pr.Out.Header["X-Forwarded-For"] = v
		}
	}
	pr.SetXForwarded()
	if trusted {
		// Behind a TLS-terminating load balancer the scheme and host the
		// client used are what it reported, not what edge saw.
		if proto := firstToken(pr.In.Header.Get("X-Forwarded-Proto")); proto == "http" || proto == "https" {
			pr.Out.Header.Set("X-Forwarded-Proto", proto)
		}
		if host := firstToken(pr.In.Header.Get("X-Forwarded-Host")); host != "" {
			pr.Out.Header.Set("X-Forwarded-Host", host)
		}
	}
	if n := pr.In.ContentLength; n > 0 && n <= p.whole && !isGRPC(pr.In.Header.Get("Content-Type")) {
		pr.Out.Body, pr.Out.GetBody = readWhole(pr.In.Body, n)
	}
	// What edge tells the service is set here, after ReverseProxy removed
	// the hop-by-hop headers: a client's "Connection: X-Real-Ip" names a
	// header of the incoming hop and must not remove the one edge sets.
	out := pr.Out.Header
	delete(out, rpc.EdgeProofHeader)
	if info == nil {
		// Without the router nobody vetted these client-supplied headers.
		out.Del("Forwarded")
		out.Del(rpc.ClientAddrHeader)
		return
	}
	out[rpc.ClientAddrHeader] = []string{info.ClientAddr}
	out["X-Request-Id"] = []string{info.RequestID}
	if p.proof != "" {
		out[rpc.EdgeProofHeader] = []string{p.proof}
	}
}

// wholeBody is the largest request body read whole before it is sent on:
// net/http's transport writes a body it knows to be in memory with the
// request's header in one write, but flushes the header alone first for a
// body it must stream, which costs each form POST a system call here and
// one in the service. Forms and unary RPCs are far smaller; bigger bodies
// and gRPC are streamed as they arrive.
const wholeBody = 16 << 10

// readWhole reads the n bytes of body promised by Content-Length. A body
// that fails (cut short, over edge's limit, the client gone) is sent on as
// far as it came, followed by its error, which ends the request as it would
// have streamed.
//
// getBody, nil for a failed body, returns the body again from its start, so
// a request on a kept connection the service had just closed can be sent
// again.
func readWhole(body io.Reader, n int64) (_ io.ReadCloser, getBody func() (io.ReadCloser, error)) {
	buf := make([]byte, n)
	got, err := io.ReadFull(body, buf)
	if err != nil {
		if err == io.ErrUnexpectedEOF || err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return io.NopCloser(io.MultiReader(bytes.NewReader(buf[:got]), errReader{err})), nil
	}
	getBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(buf)), nil }
	return io.NopCloser(bytes.NewReader(buf)), getBody
}

type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }

// keepTrailers drops Content-Length from a response with trailers: an HTTP/2
// service may send both, but an HTTP/1.1 client only receives trailers in a
// chunked body, which a Content-Length would rule out.
func keepTrailers(res *http.Response) error {
	if len(res.Trailer) > 0 {
		res.Header.Del("Content-Length")
		res.ContentLength = -1
	}
	return nil
}

// hostPort is u's host with the scheme's default port when it has none.
func hostPort(u *url.URL) string {
	if u.Port() != "" {
		return u.Host
	}
	return net.JoinHostPort(u.Hostname(), "80")
}

func firstToken(v string) string {
	first, _, _ := strings.Cut(v, ",")
	return strings.TrimSpace(first)
}

func (p *Proxy) handleError(w http.ResponseWriter, r *http.Request, err error) {
	// Transport errors may quote the URL, query string included; log only
	// the cause.
	var uerr *url.Error
	if errors.As(err, &uerr) {
		err = uerr.Err
	}
	attrs := []any{
		"service", p.svc, "target", p.target.Host, "method", r.Method, "path", r.URL.Path,
		"request_id", reqinfo.RequestID(r.Context()), "error", err.Error(),
	}
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		apierror.Respond(w, r, http.StatusRequestEntityTooLarge, apierror.RequestTooLarge,
			fmt.Sprintf("request body larger than %d bytes", tooLarge.Limit))
	case r.Context().Err() != nil:
		p.logger.DebugContext(r.Context(), "client went away before the service answered", attrs...)
		w.WriteHeader(StatusClientClosedRequest)
	default:
		p.logger.WarnContext(r.Context(), "service unavailable", attrs...)
		w.Header().Set("Retry-After", fmt.Sprint(RetryAfterSeconds))
		apierror.Respond(w, r, http.StatusServiceUnavailable, apierror.TemporarilyUnavailable, p.svc+" service unavailable")
	}
}
