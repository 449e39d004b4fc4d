package router

import (
	"net/http"

	"github.com/gin-gonic/gin"
)

// Edge's response header values. The slices are shared by every response:
// net/http and the proxy only replace or append to header values (append
// copies a full slice), never write into them.
var (
	valNosniff        = []string{"nosniff"}
	valNoReferrer     = []string{"no-referrer"}
	valDeny           = []string{"DENY"}
	valFrameAncestors = []string{"frame-ancestors 'none'"}
	valHSTS           = []string{"max-age=31536000"}
	valAnyOrigin      = []string{"*"}
	valExposeHeaders  = []string{corsExposeHeaders}
)

// rateHeaders are the canonical names of the rate-limit headers, in the
// order of headerWriter.rate: the IETF draft's and the common X- ones.
var rateHeaders = [3][2]string{
	{"Ratelimit-Limit", "X-Ratelimit-Limit"},
	{"Ratelimit-Remaining", "X-Ratelimit-Remaining"},
	{"Ratelimit-Reset", "X-Ratelimit-Reset"},
}

// headerWriter adds edge's response headers at the moment the response
// header is sent. Edge's policy headers, the request id and the rate-limit
// headers override what the service wrote (no duplicates from a proxied
// service); Content-Security-Policy, Strict-Transport-Security and the CORS
// headers are defaults a service may set itself.
type headerWriter struct {
	gin.ResponseWriter
	requestID [1]string
	hsts      bool
	cors      bool
	rate      []string // limit, remaining, reset; nil without a limiter
	applied   bool
}

var _ gin.ResponseWriter = (*headerWriter)(nil)

func (w *headerWriter) apply() {
	if w.applied {
		return
	}
	w.applied = true
	h := w.Header()
	h["X-Request-Id"] = w.requestID[:]
	h["X-Content-Type-Options"] = valNosniff
	h["Referrer-Policy"] = valNoReferrer
	h["X-Frame-Options"] = valDeny
	for i, names := range rateHeaders {
		if i < len(w.rate) {
			v := w.rate[i : i+1 : i+1]
			h[names[0]], h[names[1]] = v, v
		}
	}
	setDefault(h, "Content-Security-Policy", valFrameAncestors)
	if w.hsts {
		setDefault(h, "Strict-Transport-Security", valHSTS)
	}
	if w.cors {
		setDefault(h, "Access-Control-Allow-Origin", valAnyOrigin)
		setDefault(h, "Access-Control-Expose-Headers", valExposeHeaders)
	}
}

func setDefault(h http.Header, key string, v []string) {
	if len(h[key]) == 0 {
		h[key] = v
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
