package cachedjson

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
)

// The document is serialized once per version and served with its ETag;
// If-None-Match gets 304, HEAD no body, other methods 405.
func TestServesOncePerVersion(t *testing.T) {
	t.Parallel()
	version, marshals := uint64(1), 0
	h := New("test", "public, max-age=60", func() (uint64, func() ([]byte, error)) {
		v := version
		return v, func() ([]byte, error) { marshals++; return []byte(`{"v":` + strconv.FormatUint(v, 10) + `}`), nil }
	}, nil)
	get := func(method string, header ...string) *httptest.ResponseRecorder {
		r := httptest.NewRequest(method, "/doc", nil)
		if len(header) == 2 {
			r.Header.Set(header[0], header[1])
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}
	first := get(http.MethodGet)
	etag := first.Header().Get("Etag")
	if first.Code != 200 || first.Body.String() != `{"v":1}` || etag == "" || first.Header().Get("Cache-Control") != "public, max-age=60" ||
		first.Header().Get("Content-Length") != "7" {
		t.Fatalf("GET: %d %q %v", first.Code, first.Body, first.Header())
	}
	if w := get(http.MethodGet, "If-None-Match", `W/"x", `+etag); w.Code != http.StatusNotModified || w.Body.Len() != 0 {
		t.Fatalf("If-None-Match: %d %q", w.Code, w.Body)
	}
	if w := get(http.MethodHead); w.Code != 200 || w.Body.Len() != 0 || w.Header().Get("Etag") != etag {
		t.Fatalf("HEAD: %d %q", w.Code, w.Body)
	}
	if w := get(http.MethodPost); w.Code != http.StatusMethodNotAllowed || w.Header().Get("Allow") != "GET, HEAD" {
		t.Fatalf("POST: %d", w.Code)
	}
	if marshals != 1 {
		t.Fatalf("%d serializations of one version", marshals)
	}
	version = 2
	if w := get(http.MethodGet, "If-None-Match", etag); w.Code != 200 || w.Body.String() != `{"v":2}` || w.Header().Get("Etag") == etag {
		t.Fatalf("after a new version: %d %q", w.Code, w.Body)
	}
	if b, err := h.Body(); err != nil || string(b) != `{"v":2}` || marshals != 2 {
		t.Fatalf("Body: %q, %v, %d serializations", b, err, marshals)
	}
}
