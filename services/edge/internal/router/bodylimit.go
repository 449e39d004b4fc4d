package router

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync/atomic"

	"github.com/gin-gonic/gin"

	"github.com/gatehouse-id/gatehouse/services/edge/internal/apierror"
)

// bodyLimit is the middleware that bounds a route's request bodies to
// limit bytes. A declared Content-Length over the limit is answered 413
// before the service runs. A streamed body is cut by http.MaxBytesReader;
// whatever the service or the proxy then answers was based on a truncated
// body, so unless its response had already started it is replaced by the
// 413.
func bodyLimit(limit int64) gin.HandlerFunc {
	return func(c *gin.Context) {
		r := c.Request
		if r.ContentLength > limit {
			writeTooLarge(c.Writer, r, limit)
			c.Abort()
			return
		}
		if r.Body == nil || r.Body == http.NoBody {
			return
		}
		st := stateOf(c)
		st.body.ReadCloser = http.MaxBytesReader(c.Writer, r.Body, limit)
		r.Body = &st.body
		st.limited = limitWriter{ResponseWriter: c.Writer, req: r, body: &st.body, limit: limit}
		c.Writer = &st.limited
		c.Next()
		// The service wrote nothing after its body was cut: the 413.
		if !st.limited.started {
			st.limited.begin()
		}
	}
}

// writeTooLarge answers 413 {"error":"request_too_large"}, or
// ResourceExhausted to a gRPC or Connect request (apierror.WriteRPC).
func writeTooLarge(w http.ResponseWriter, r *http.Request, limit int64) {
	description := fmt.Sprintf("request body larger than %d bytes", limit)
	if !apierror.WriteRPC(w, r, apierror.RequestTooLarge, description) {
		apierror.Write(w, http.StatusRequestEntityTooLarge, apierror.RequestTooLarge, description)
	}
}

// limitedBody remembers that the limit was hit. The proxy's transport reads
// the body on its own goroutine, hence the atomic.
type limitedBody struct {
	io.ReadCloser
	exceeded atomic.Bool
}

func (b *limitedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	var tooLarge *http.MaxBytesError
	if err != nil && errors.As(err, &tooLarge) {
		b.exceeded.Store(true)
	}
	return n, err
}

// limitWriter swaps the response for a 413 when the body limit was hit before
// the response started. It is used from the handler goroutine only.
type limitWriter struct {
	gin.ResponseWriter
	req      *http.Request // for the form of the 413
	body     *limitedBody
	limit    int64
	started  bool
	replaced bool
	// discard takes what the handler adds to the header once its answer
	// was replaced, trailers included.
	discard http.Header
}

var _ gin.ResponseWriter = (*limitWriter)(nil)

// begin marks the response as started and reports whether the handler's
// output passes through.
func (w *limitWriter) begin() bool {
	if !w.started {
		w.started = true
		if w.body.exceeded.Load() {
			w.replaced = true
			h := w.ResponseWriter.Header()
			for k := range h {
				delete(h, k) // the handler's headers describe its discarded answer
			}
			writeTooLarge(w.ResponseWriter, w.req, w.limit)
		}
	}
	return !w.replaced
}

func (w *limitWriter) Header() http.Header {
	if w.replaced {
		if w.discard == nil {
			w.discard = http.Header{}
		}
		return w.discard
	}
	return w.ResponseWriter.Header()
}

func (w *limitWriter) WriteHeader(code int) {
	if !w.replaced {
		w.ResponseWriter.WriteHeader(code)
	}
}

func (w *limitWriter) WriteHeaderNow() {
	if w.begin() {
		w.ResponseWriter.WriteHeaderNow()
	}
}

func (w *limitWriter) Write(b []byte) (int, error) {
	if !w.begin() {
		return len(b), nil
	}
	return w.ResponseWriter.Write(b)
}

func (w *limitWriter) WriteString(s string) (int, error) {
	if !w.begin() {
		return len(s), nil
	}
	return w.ResponseWriter.WriteString(s)
}

func (w *limitWriter) Flush() {
	w.begin()
	w.ResponseWriter.Flush()
}

// Unwrap lets http.ResponseController reach the connection.
func (w *limitWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
