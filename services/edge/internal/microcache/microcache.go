// Package microcache keeps, for at most a second, the public responses a
// service marks cacheable — discovery and the key set — so edge answers
// the identical GETs relying parties and gateways repeat without asking
// the service each time (what operators configure nginx's proxy_cache
// for). A response is kept only when it is 200 with Cache-Control public
// and a positive max-age, and no Set-Cookie, Vary or trailers; it is kept
// for the lesser of MaxAge and its max-age, so what a client caches is
// never older than the service allows by more than MaxAge.
//
// A response is kept by its path alone: discovery and the key set depend
// on neither the Host header nor a query (they are built from the
// configured issuer), and keying by what a client chooses would let
// anyone empty the cache for everyone. A request with a query is the
// service's to answer, and keeps nothing.
//
// The key set's pre-publication window (tokens' keys.Options.PrePublish)
// covers that second (rpc.EdgeCacheMaxAge, which it is checked against):
// a key is published well over a minute before it signs.
package microcache

import (
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/maypok86/otter/v2"

	"github.com/gatehouse-id/gatehouse/pkg/cache"
	"github.com/gatehouse-id/gatehouse/pkg/rpc"
)

// MaxAge is the longest a response is kept.
const MaxAge = rpc.EdgeCacheMaxAge

const (
	// maxEntries bounds the responses kept (one per cached path, so a
	// safety bound only); past it the coldest are evicted.
	maxEntries = 64
	// maxBody is the largest body kept.
	maxBody = 64 << 10
)

// Cache is an http.Handler in front of next.
type Cache struct {
	next    http.Handler
	now     func() time.Time
	entries *otter.Cache[string, *entry]
}

type entry struct {
	header  http.Header // the service's, less Date; values clipped (append copies)
	body    []byte
	expires time.Time
}

// New returns a cache in front of next.
func New(next http.Handler) *Cache {
	c := &Cache{next: next, now: time.Now}
	c.entries = cache.New(cache.Options[string, *entry]{Name: "edge_microcache", Size: maxEntries,
		Now: func() time.Time { return c.now() }, ExpiresAt: func(_ string, e *entry) time.Time { return e.expires }})
	return c
}

// ServeHTTP answers GET and HEAD from a kept response, or asks next and
// keeps its response when it may. Conditional, range and no-cache requests
// always go to next, which knows its ETag.
func (c *Cache) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if (r.Method != http.MethodGet && r.Method != http.MethodHead) || bypass(r.Header) || r.URL.RawQuery != "" {
		c.next.ServeHTTP(w, r)
		return
	}
	key := r.URL.Path
	now := c.now()
	if e, ok := c.entries.GetIfPresent(key); ok && now.Before(e.expires) {
		h := w.Header()
		for k, v := range e.header {
			h[k] = v
		}
		w.WriteHeader(http.StatusOK)
		if r.Method == http.MethodGet {
			_, _ = w.Write(e.body)
		}
		return
	}
	if r.Method == http.MethodHead {
		c.next.ServeHTTP(w, r)
		return
	}
	rec := &recorder{ResponseWriter: w}
	c.next.ServeHTTP(rec, r)
	if e := rec.entry(now); e != nil {
		c.entries.Set(key, e)
	}
}

func bypass(h http.Header) bool {
	if h.Get("If-None-Match") != "" || h.Get("If-Modified-Since") != "" || h.Get("Range") != "" {
		return true
	}
	for _, v := range h.Values("Cache-Control") {
		if strings.Contains(strings.ToLower(v), "no-cache") {
			return true
		}
	}
	return strings.Contains(strings.ToLower(h.Get("Pragma")), "no-cache")
}

// recorder passes a response through, keeping a copy of its header (as
// it was when the status was sent) and body.
type recorder struct {
	http.ResponseWriter
	status  int
	header  http.Header
	body    []byte
	tooLong bool
}

func (rec *recorder) WriteHeader(code int) {
	if rec.status == 0 && code >= 200 { // 1xx are interim
		rec.status = code
		rec.header = rec.ResponseWriter.Header().Clone()
	}
	rec.ResponseWriter.WriteHeader(code)
}

func (rec *recorder) Write(b []byte) (int, error) {
	if rec.status == 0 {
		rec.WriteHeader(http.StatusOK)
	}
	if !rec.tooLong {
		if len(rec.body)+len(b) > maxBody {
			rec.tooLong, rec.body = true, nil
		} else {
			rec.body = append(rec.body, b...)
		}
	}
	return rec.ResponseWriter.Write(b)
}

// Flush is passed on, but a flushed response is a stream: not kept.
func (rec *recorder) Flush() {
	rec.tooLong, rec.body = true, nil
	if f, ok := rec.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the connection.
func (rec *recorder) Unwrap() http.ResponseWriter { return rec.ResponseWriter }

// entry is what to keep of the response, or nil.
func (rec *recorder) entry(now time.Time) *entry {
	if rec.status != http.StatusOK || rec.tooLong {
		return nil
	}
	h := rec.header
	if len(h.Values("Set-Cookie")) > 0 || len(h.Values("Vary")) > 0 || len(h.Values("Trailer")) > 0 {
		return nil
	}
	if cl := h.Get("Content-Length"); cl != "" && cl != strconv.Itoa(len(rec.body)) {
		return nil // cut short
	}
	age, ok := publicMaxAge(h.Values("Cache-Control"))
	if !ok {
		return nil
	}
	h.Del("Date")
	h.Del("X-Request-Id") // the request's, set by edge on each answer
	for k, v := range h {
		h[k] = slices.Clip(v)
	}
	return &entry{header: h, body: rec.body, expires: now.Add(min(age, MaxAge))}
}

// publicMaxAge is the max-age of a response that any cache may keep:
// "public", a positive max-age, and none of no-store, no-cache, private or
// s-maxage=0.
func publicMaxAge(values []string) (time.Duration, bool) {
	public := false
	var age time.Duration
	for _, v := range values {
		for d := range strings.SplitSeq(v, ",") {
			name, arg, _ := strings.Cut(strings.TrimSpace(d), "=")
			switch strings.ToLower(name) {
			case "public":
				public = true
			case "no-store", "no-cache", "private", "must-understand":
				return 0, false
			case "max-age", "s-maxage":
				n, err := strconv.Atoi(strings.Trim(arg, `"`))
				if err != nil || n <= 0 {
					return 0, false
				}
				if age == 0 || time.Duration(n)*time.Second < age {
					age = time.Duration(n) * time.Second
				}
			}
		}
	}
	return age, public && age > 0
}
