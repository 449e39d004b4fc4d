// Package cachedjson serves a public JSON document (discovery, the key
// set) that changes rarely and is read often: serialized once per
// version, with a strong ETag (304 on If-None-Match), Content-Length and
// the caller's Cache-Control, to GET and HEAD only.
package cachedjson

import (
	"crypto/sha256"
	"encoding/base64"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
)

// Source says which version of the document is current and how to
// serialize it: version is compared with the last one served, and
// marshal runs only when it differs. Two versions may serialize to the
// same bytes; the ETag is the body's, so clients see no change then.
type Source func() (version uint64, marshal func() ([]byte, error))

// Handler serves one document.
type Handler struct {
	name         string
	cacheControl string
	src          Source
	logger       *slog.Logger
	cur          atomic.Pointer[document]
}

type document struct {
	version uint64
	body    []byte
	etag    string
	length  string
}

// New serves src's document; name names it in logs ("discovery").
func New(name, cacheControl string, src Source, logger *slog.Logger) *Handler {
	if logger == nil {
		logger = slog.Default()
	}
	return &Handler{name: name, cacheControl: cacheControl, src: src, logger: logger}
}

// ServeHTTP answers GET and HEAD (304 when If-None-Match holds the current
// ETag); other methods get 405.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	doc, err := h.document()
	if err != nil {
		h.logger.ErrorContext(r.Context(), h.name+": cannot serialize the document", "err", err)
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	hd := w.Header()
	hd["Content-Type"] = []string{"application/json"}
	hd["Cache-Control"] = []string{h.cacheControl}
	hd["Etag"] = []string{doc.etag}
	if inm := r.Header.Get("If-None-Match"); inm != "" && matches(inm, doc.etag) {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	hd["Content-Length"] = []string{doc.length}
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodGet {
		_, _ = w.Write(doc.body)
	}
}

// Body is the document as served.
func (h *Handler) Body() ([]byte, error) {
	doc, err := h.document()
	if err != nil {
		return nil, err
	}
	return doc.body, nil
}

func (h *Handler) document() (*document, error) {
	version, marshal := h.src()
	if d := h.cur.Load(); d != nil && d.version == version {
		return d, nil
	}
	body, err := marshal()
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(body)
	d := &document{version: version, body: body, etag: `"` + base64.RawURLEncoding.EncodeToString(sum[:16]) + `"`,
		length: strconv.Itoa(len(body))}
	h.cur.Store(d)
	return d, nil
}

// matches reports whether an If-None-Match value (RFC 9110 §13.1.2: "*" or
// a list of entity tags, compared weakly) names etag.
func matches(ifNoneMatch, etag string) bool {
	for _, t := range strings.Split(ifNoneMatch, ",") {
		t = strings.TrimSpace(t)
		if t == "*" || strings.TrimPrefix(t, "W/") == etag {
			return true
		}
	}
	return false
}
