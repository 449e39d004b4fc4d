package router

import (
	"net/http"

	"github.com/gin-gonic/gin"
)

// headerWriter adds edge's response headers at the moment the response
// header is sent. set overrides what the service wrote (edge policy, and no
// duplicates from a proxied service); defaults fill in only what the service
// did not set.
type headerWriter struct {
	gin.ResponseWriter
	set      http.Header
	defaults http.Header
	applied  bool
}

var _ gin.ResponseWriter = (*headerWriter)(nil)

func headersOf(c *gin.Context) *headerWriter {
	return c.MustGet(keyHeaders).(*headerWriter)
}

func (w *headerWriter) apply() {
	if w.applied {
		return
	}
	w.applied = true
	h := w.Header()
	for k, v := range w.set {
		h[k] = v
	}
	for k, v := range w.defaults {
		if len(h[k]) == 0 {
			h[k] = v
		}
	}
}

// gin sends the header on WriteHeaderNow, Write, WriteString and Flush;
// WriteHeader only records the status.

func (w *headerWriter) WriteHeaderNow() {
	w.apply()
	w.ResponseWriter.WriteHeaderNow()
}

func (w *headerWriter) Write(b []byte) (int, error) {
	w.apply()
	return w.ResponseWriter.Write(b)
}

func (w *headerWriter) WriteString(s string) (int, error) {
	w.apply()
	return w.ResponseWriter.WriteString(s)
}

func (w *headerWriter) Flush() {
	w.apply()
	w.ResponseWriter.Flush()
}

// Unwrap lets http.ResponseController reach the connection.
func (w *headerWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
