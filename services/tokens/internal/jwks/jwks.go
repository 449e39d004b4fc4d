package jwks

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/gatehouse-id/gatehouse/services/tokens/internal/keys"
)

// Path is where the key set is served.
const Path = "/oauth/v2/keys"

// Source provides the published keys; keys.Manager implements it.
type Source interface {
	PublicKeys() keys.PublicKeySet
}

var _ Source = (*keys.Manager)(nil)

// Handler serves the key set.
type Handler struct {
	src          Source
	cacheControl string
	logger       *slog.Logger
	body         atomic.Pointer[document]
}

// document is a serialized key set and what is derived from it.
type document struct {
	version uint64
	body    []byte
	etag    string
	length  string
}

// NewHandler serves the keys of src, cacheable for maxAge (pass
// keys.Manager.KeySetMaxAge, which the pre-publication window was checked
// against).
func NewHandler(src Source, maxAge time.Duration, logger *slog.Logger) *Handler {
	if logger == nil {
		logger = slog.Default()
	}
	return &Handler{
		src:          src,
		cacheControl: "public, max-age=" + strconv.FormatInt(int64(maxAge/time.Second), 10),
		logger:       logger,
	}
}

// ServeHTTP answers GET and HEAD with the key set (304 when If-None-Match
// holds the current ETag); other methods get 405.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	doc, err := h.document()
	if err != nil {
		h.logger.ErrorContext(r.Context(), "jwks: cannot serialize the key set", "err", err)
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

// Body is the key set as served, for the internal API's GetKeySet.
func (h *Handler) Body() ([]byte, error) {
	doc, err := h.document()
	if err != nil {
		return nil, err
	}
	return doc.body, nil
}

// document returns the serialized key set, serializing it again only when
// the source's version has changed.
func (h *Handler) document() (*document, error) {
	set := h.src.PublicKeys()
	if d := h.body.Load(); d != nil && d.version == set.Version {
		return d, nil
	}
	d, err := serialize(set)
	if err != nil {
		return nil, err
	}
	h.body.Store(d)
	return d, nil
}

func serialize(set keys.PublicKeySet) (*document, error) {
	ks := make([]json.RawMessage, 0, len(set.Keys))
	for _, k := range set.Keys {
		b, err := json.Marshal(k.JWK)
		if err != nil {
			return nil, fmt.Errorf("encode key %s: %w", k.ID, err)
		}
		ks = append(ks, b)
	}
	body, err := json.Marshal(struct {
		Keys []json.RawMessage `json:"keys"`
	}{ks})
	if err != nil {
		return nil, fmt.Errorf("encode key set: %w", err)
	}
	sum := sha256.Sum256(body)
	return &document{
		version: set.Version,
		body:    body,
		etag:    `"` + base64.RawURLEncoding.EncodeToString(sum[:16]) + `"`,
		length:  strconv.Itoa(len(body)),
	}, nil
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
