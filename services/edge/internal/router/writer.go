package router

import (
	"net/http"

	"github.com/gin-gonic/gin"
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
	requestID [1]string // X-Request-Id's value, held here so setting it allocates nothing
	hsts      bool
	cors      bool
	rate      []string // limit, remaining, reset; nil without a limiter
	applied   bool
}

var _ gin.ResponseWriter = (*headerWriter)(nil)

// Values of edge's constant headers, shared by every response: assigned to
// the header map as they are, without Header.Set's canonicalisation and
// allocation. Each has length and capacity 1, so an append (Header.Add)
// copies instead of writing into it, and nothing writes to a response's
// header once it is sent.
var (
	nosniff       = []string{"nosniff"}
	noReferrer    = []string{"no-referrer"}
	frameDeny     = []string{"DENY"}
	frameNone     = []string{"frame-ancestors 'none'"}
	hstsYear      = []string{"max-age=31536000"}
	anyOrigin     = []string{"*"}
	exposeHeaders = []string{corsExposeHeaders}
)

func (w *headerWriter) apply() {
	if w.applied {
		return
	}
	w.applied = true
	h := w.Header()
	h["X-Request-Id"] = w.requestID[:]
	h["X-Content-Type-Options"] = nosniff
	h["Referrer-Policy"] = noReferrer
	h["X-Frame-Options"] = frameDeny
	for i, names := range rateHeaders {
		if i < len(w.rate) {
			h.Set(names[0], w.rate[i])
			h.Set(names[1], w.rate[i])
		}
	}
	setDefault(h, "Content-Security-Policy", frameNone)
	if w.hsts {
		setDefault(h, "Strict-Transport-Security", hstsYear)
	}
	if w.cors {
		setDefault(h, "Access-Control-Allow-Origin", anyOrigin)
		setDefault(h, "Access-Control-Expose-Headers", exposeHeaders)
	}
}

// setDefault sets key, a canonical name, unless the service set it.
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
