package proxy

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"sync"
	"syscall"
	"time"
)

// h1Transport is edge's HTTP/1.1 keep-alive client to one service over
// plain TCP. A round trip runs on the caller's goroutine: the request is
// written with net/http's Request.Write and the answer read with
// http.ReadResponse on the connection, so framing, chunking and trailers
// are net/http's own. net/http's Transport instead hands each request to a
// writer goroutine and each response back from a reader goroutine; on a
// loaded edge those hand-offs are futex wake-ups. Without them edge's CPU
// per proxied request fell by a sixth to a third (make bench, distributed,
// two interleaved pairs of runs: introspection 0.235/0.318 → 0.195/0.235
// ms, opaque token 0.413/0.580 → 0.308/0.395 ms).
//
// What it does not do, since edge does not need it: TLS (an https service
// URL uses net/http's Transport), proxies from the environment, 1xx
// responses other than being skipped, and protocol upgrades.
type h1Transport struct {
	addr          string // host:port
	dialer        net.Dialer
	headerTimeout time.Duration // from the request's end to the response header; 0: none
	idleTimeout   time.Duration // a kept connection older than this is closed
	maxIdle       int

	mu   sync.Mutex
	idle []*h1Conn // oldest first; the newest is reused first
}

func newH1Transport(addr string, headerTimeout time.Duration) *h1Transport {
	return &h1Transport{
		addr:          addr,
		dialer:        net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second},
		headerTimeout: headerTimeout,
		// Under the services' own idle timeout (2 min), so edge closes a
		// kept connection before the service does.
		idleTimeout: 90 * time.Second,
		// One request per connection at a time: as many as edge has in
		// flight to the service.
		maxIdle: 256,
	}
}

// h1Conn is a connection with its buffers; sent counts the bytes written
// to the network by the current request.
type h1Conn struct {
	net.Conn
	br       *bufio.Reader
	bw       *bufio.Writer
	sent     int
	idleFrom time.Time
}

func (c *h1Conn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	c.sent += n
	return n, err
}

// get returns a kept connection that is still open, or a new one.
func (t *h1Transport) get(ctx context.Context) (c *h1Conn, reused bool, err error) {
	now := time.Now()
	for {
		t.mu.Lock()
		n := len(t.idle)
		if n == 0 {
			t.mu.Unlock()
			break
		}
		c = t.idle[n-1]
		t.idle[n-1] = nil
		t.idle = t.idle[:n-1]
		t.mu.Unlock()
		if now.Sub(c.idleFrom) < t.idleTimeout && alive(c.Conn) {
			c.sent = 0
			return c, true, nil
		}
		c.Close()
	}
	nc, err := t.dialer.DialContext(ctx, "tcp", t.addr)
	if err != nil {
		return nil, false, err
	}
	c = &h1Conn{Conn: nc}
	c.br = bufio.NewReaderSize(nc, 16<<10)
	c.bw = bufio.NewWriterSize(c, 16<<10)
	return c, false, nil
}

// put keeps c for reuse, and closes kept connections idle too long.
func (t *h1Transport) put(c *h1Conn) {
	now := time.Now()
	c.idleFrom = now
	var closing []*h1Conn
	t.mu.Lock()
	for len(t.idle) > 0 && now.Sub(t.idle[0].idleFrom) >= t.idleTimeout {
		closing = append(closing, t.idle[0])
		t.idle[0] = nil
		t.idle = t.idle[1:]
	}
	if len(t.idle) < t.maxIdle {
		t.idle = append(t.idle, c)
	} else {
		closing = append(closing, c)
	}
	t.mu.Unlock()
	for _, c := range closing {
		c.Close()
	}
}

// CloseIdleConnections closes the kept connections.
func (t *h1Transport) CloseIdleConnections() {
	t.mu.Lock()
	idle := t.idle
	t.idle = nil
	t.mu.Unlock()
	for _, c := range idle {
		c.Close()
	}
}

// idleCount is how many connections are kept (tests).
func (t *h1Transport) idleCount() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.idle)
}

// RoundTrip implements http.RoundTripper. A kept connection that the
// service closed just as it was taken fails before any answer (EOF, reset);
// the request is then sent once more on a new connection when nothing of it reached
// the network, or when it is a GET, HEAD or OPTIONS without a body (as
// net/http's Transport does), provided its body, if any, can be had again
// (GetBody).
func (t *h1Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	for attempt := 0; ; attempt++ {
		c, reused, err := t.get(ctx)
		if err != nil {
			closeBody(req)
			return nil, err
		}
		res, err := t.roundTrip(ctx, c, req)
		if err == nil {
			return res, nil
		}
		c.Close()
		if reused && attempt == 0 && ctx.Err() == nil && closedUnder(err) && (c.sent == 0 || replayable(req)) {
			if again, ok := rewind(req); ok {
				req = again
				continue
			}
		}
		closeBody(req)
		return nil, err
	}
}

// rewind returns req with its body from the start, if it can be sent again.
func rewind(req *http.Request) (*http.Request, bool) {
	if req.Body == nil || req.Body == http.NoBody {
		return req, true
	}
	if req.GetBody == nil {
		return nil, false
	}
	body, err := req.GetBody()
	if err != nil {
		return nil, false
	}
	again := *req // RoundTrip must not change the caller's request
	again.Body = body
	return &again, true
}

// closedUnder reports whether err is the service having closed the
// connection (not a timeout: a service that does not answer in time is
// not asked again).
func closedUnder(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

func replayable(req *http.Request) bool {
	switch req.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		return req.Body == nil || req.Body == http.NoBody
	}
	return false
}

func closeBody(req *http.Request) {
	if req.Body != nil {
		_ = req.Body.Close()
	}
}

// roundTrip sends req on c and reads the response header. On success the
// response body owns c: it is kept for reuse once the body was read to
// its end, closed otherwise.
func (t *h1Transport) roundTrip(ctx context.Context, c *h1Conn, req *http.Request) (*http.Response, error) {
	// A cancelled request (the client went away) unblocks the I/O.
	stop := context.AfterFunc(ctx, func() { _ = c.SetDeadline(aLongTimeAgo) })
	res, err := t.exchange(ctx, c, req)
	if !stop() {
		if err == nil {
			res.Body.Close()
		}
		return nil, ctx.Err()
	}
	if err != nil {
		return nil, err
	}
	b := &h1Body{ReadCloser: res.Body, t: t, c: c, reuse: !res.Close && !req.Close}
	if res.Body == http.NoBody {
		b.finish(true) // nothing to read: the connection is free now
	} else {
		b.stop = context.AfterFunc(ctx, func() { _ = c.SetDeadline(aLongTimeAgo) })
	}
	res.Body = b
	return res, nil
}

func (t *h1Transport) exchange(ctx context.Context, c *h1Conn, req *http.Request) (*http.Response, error) {
	// Request.Write hides why reading a streamed body failed (edge's body
	// limit answers 413 on an *http.MaxBytesError); keep it. A body in
	// memory (GetBody set) cannot fail, and must stay unwrapped for
	// Request.Write to send it with the header in one write.
	var body *readErrBody
	if req.Body != nil && req.Body != http.NoBody && req.GetBody == nil {
		body = &readErrBody{ReadCloser: req.Body}
		again := *req
		again.Body = body
		req = &again
	}
	if err := req.Write(c.bw); err != nil {
		if body != nil && body.err != nil {
			return nil, body.err
		}
		return earlyAnswer(ctx, c, req, err)
	}
	if err := c.bw.Flush(); err != nil {
		return earlyAnswer(ctx, c, req, err)
	}
	if t.headerTimeout > 0 {
		_ = c.SetReadDeadline(time.Now().Add(t.headerTimeout))
		if ctx.Err() != nil {
			// The request was cancelled before the deadline above replaced
			// the one its cancellation set.
			_ = c.SetDeadline(aLongTimeAgo)
		}
	}
	res, err := readResponse(c, req)
	if err != nil {
		return nil, err
	}
	if t.headerTimeout > 0 {
		_ = c.SetReadDeadline(time.Time{})
	}
	return res, nil
}

// earlyWait bounds the wait for an answer the service may have sent before
// it closed the connection on a request it had not read whole.
const earlyWait = time.Second

// earlyAnswer is the response of a request whose writing failed with
// writeErr, as when the service closed the connection (net/http reports
// that as a body read error, which hides the cause): a service may answer
// before reading the body (a 400, 405 or 413 for a request it refuses), as
// net/http's server does, and that answer is the response (net/http's
// Transport returns it too), never a transport error that would count
// against the service. Without one, writeErr stands. The connection is
// not kept.
func earlyAnswer(ctx context.Context, c *h1Conn, req *http.Request, writeErr error) (*http.Response, error) {
	_ = c.SetReadDeadline(time.Now().Add(earlyWait))
	if ctx.Err() != nil {
		_ = c.SetDeadline(aLongTimeAgo) // cancelled before the deadline above replaced its own
	}
	res, err := readResponse(c, req)
	if err != nil {
		return nil, writeErr
	}
	_ = c.SetReadDeadline(time.Time{})
	res.Close = true
	return res, nil
}

// readResponse reads req's response from c, past interim answers (100
// Continue, 103 Early Hints).
func readResponse(c *h1Conn, req *http.Request) (*http.Response, error) {
	res, err := http.ReadResponse(c.br, req)
	for err == nil && res.StatusCode >= 100 && res.StatusCode < 200 && res.StatusCode != http.StatusSwitchingProtocols {
		res, err = http.ReadResponse(c.br, req)
	}
	return res, err
}

// readErrBody remembers the error reading the request body failed with.
type readErrBody struct {
	io.ReadCloser
	err error
}

func (b *readErrBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil && err != io.EOF {
		b.err = err
	}
	return n, err
}

// h1Body is a response body that owns its connection.
type h1Body struct {
	io.ReadCloser
	t     *h1Transport
	c     *h1Conn
	stop  func() bool // ends the cancellation watch; nil when none
	reuse bool        // the exchange allows another request on c
	done  bool
}

func (b *h1Body) Read(p []byte) (int, error) {
	if b.done {
		return 0, io.EOF
	}
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF {
		b.finish(true)
	}
	return n, err
}

// Close before the end of the body closes the connection: what is left of
// the body would otherwise be read as the next response.
func (b *h1Body) Close() error {
	b.finish(false)
	return nil
}

func (b *h1Body) finish(eof bool) {
	if b.done {
		return
	}
	b.done = true
	watching := b.stop == nil || b.stop()
	if eof && b.reuse && watching && b.c.br.Buffered() == 0 {
		_ = b.c.SetDeadline(time.Time{})
		b.t.put(b.c)
		return
	}
	b.c.Close()
}

var aLongTimeAgo = time.Unix(1, 0)
