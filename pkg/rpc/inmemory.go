package rpc

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"

	"connectrpc.com/connect"
)

// NewInMemoryClient returns an HTTP client whose requests h serves in this
// process, without a socket: the embedded process's services call each
// other through it, with the same clients, handlers and interceptors
// (internal credential, deadlines, tracing) as over the network, so their
// checks and telemetry are those of the distributed mode. The response is
// buffered: it suits unary calls, which are all the internal APIs make.
func NewInMemoryClient(h http.Handler) *http.Client {
	return &http.Client{Transport: inMemory{h}}
}

type inMemory struct{ h http.Handler }

func (t inMemory) RoundTrip(r *http.Request) (*http.Response, error) {
	if err := r.Context().Err(); err != nil {
		return nil, err
	}
	sr := r.Clone(r.Context())
	if sr.Body == nil {
		sr.Body = http.NoBody
	}
	sr.RequestURI = r.URL.RequestURI()
	sr.RemoteAddr = "in-memory"
	if sr.Host == "" {
		sr.Host = r.URL.Host
	}
	sr.Proto, sr.ProtoMajor, sr.ProtoMinor = "HTTP/1.1", 1, 1
	w := &memWriter{header: http.Header{}}
	t.h.ServeHTTP(w, sr)
	if r.Body != nil {
		_ = r.Body.Close()
	}
	return w.response(r), nil
}

// memWriter is the server side of an in-memory exchange.
type memWriter struct {
	header  http.Header
	sent    http.Header // the header as of WriteHeader
	status  int
	body    bytes.Buffer
	written bool
}

func (w *memWriter) Header() http.Header { return w.header }

func (w *memWriter) WriteHeader(code int) {
	if w.written {
		return
	}
	w.written, w.status, w.sent = true, code, w.header.Clone()
}

func (w *memWriter) Write(b []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	return w.body.Write(b)
}

// Flush implements http.Flusher (a no-op: the response is read whole).
func (w *memWriter) Flush() { w.WriteHeader(http.StatusOK) }

func (w *memWriter) response(r *http.Request) *http.Response {
	w.WriteHeader(http.StatusOK)
	res := &http.Response{
		Status:        strconv.Itoa(w.status) + " " + http.StatusText(w.status),
		StatusCode:    w.status,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        w.sent,
		Body:          io.NopCloser(bytes.NewReader(w.body.Bytes())),
		ContentLength: int64(w.body.Len()),
		Request:       r,
	}
	// Trailers: those the header announced, and those set after the body
	// under http.TrailerPrefix (gRPC's).
	for _, k := range res.Header.Values("Trailer") {
		for _, name := range strings.Split(k, ",") {
			name = http.CanonicalHeaderKey(strings.TrimSpace(name))
			if v, ok := w.header[name]; ok {
				if res.Trailer == nil {
					res.Trailer = http.Header{}
				}
				res.Trailer[name] = v
			}
		}
	}
	for k, v := range w.header {
		if name, ok := strings.CutPrefix(k, http.TrailerPrefix); ok {
			if res.Trailer == nil {
				res.Trailer = http.Header{}
			}
			res.Trailer[http.CanonicalHeaderKey(name)] = v
		}
	}
	return res
}

// LateHandler serves with a handler bound after it was handed out: in the
// embedded process directory and tokens call each other, so one of the two
// is built before the other's handler exists (nothing calls before both
// are bound; until then a call is Unavailable).
type LateHandler struct {
	h atomic.Pointer[http.Handler]
}

// Bind sets the handler.
func (l *LateHandler) Bind(h http.Handler) { l.h.Store(&h) }

var errNotStarted = connect.NewError(connect.CodeUnavailable, errors.New("service not started"))

// ServeHTTP implements http.Handler.
func (l *LateHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if h := l.h.Load(); h != nil {
		(*h).ServeHTTP(w, r)
		return
	}
	_ = connect.NewErrorWriter().Write(w, r, errNotStarted)
}
