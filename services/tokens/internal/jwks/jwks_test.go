package jwks_test

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"

	"github.com/lestrrat-go/jwx/v3/jwk"
	"github.com/lestrrat-go/jwx/v3/jws"

	"github.com/gatehouse-id/gatehouse/pkg/db"
	"github.com/gatehouse-id/gatehouse/services/tokens/internal/jwks"
	"github.com/gatehouse-id/gatehouse/services/tokens/internal/keys"
	"github.com/gatehouse-id/gatehouse/services/tokens/internal/keys/keytest"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

func get(t testing.TB, h http.Handler, method string, header http.Header) *httptest.ResponseRecorder {
	t.Helper()
	r := httptest.NewRequest(method, jwks.Path, nil)
	for k, v := range header {
		r.Header[k] = v
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

func TestKeySet(t *testing.T) {
	for _, d := range keytest.Dialects {
		t.Run(string(d), func(t *testing.T) {
			ctx := context.Background()
			m := keytest.Manager(t, keytest.Open(t, keytest.DBOptions(t, d)), keytest.Options(keys.RS256, nil))
			h := jwks.NewHandler(m, m.KeySetMaxAge(), keytest.Quiet)
			tok, err := m.Sign([]byte(`{"sub":"1"}`))
			if err != nil {
				t.Fatal(err)
			}

			w := get(t, h, http.MethodGet, nil)
			if w.Code != http.StatusOK {
				t.Fatalf("status: got %d; want 200", w.Code)
			}
			for k, want := range map[string]string{"Content-Type": "application/json", "Cache-Control": "public, max-age=60"} {
				if got := w.Header().Get(k); got != want {
					t.Fatalf("%s: got %q; want %q", k, got, want)
				}
			}
			etag1 := w.Header().Get("ETag")
			set, err := jwk.Parse(w.Body.Bytes())
			if err != nil {
				t.Fatalf("parse key set: %v", err)
			}
			if set.Len() != 1 {
				t.Fatalf("keys: got %d; want 1", set.Len())
			}
			if _, err := jws.Verify([]byte(tok), jws.WithKeySet(set, jws.WithRequireKid(true))); err != nil {
				t.Fatalf("token does not verify with the served key set: %v", err)
			}

			// Conditional and HEAD requests.
			if w := get(t, h, http.MethodGet, http.Header{"If-None-Match": {`"other", ` + etag1}}); w.Code != http.StatusNotModified || w.Body.Len() != 0 {
				t.Fatalf("If-None-Match current: got %d with %d bytes; want 304, empty", w.Code, w.Body.Len())
			}
			if w := get(t, h, http.MethodHead, nil); w.Code != http.StatusOK || w.Body.Len() != 0 || w.Header().Get("Content-Length") == "" {
				t.Fatalf("HEAD: got %d with %d bytes; want 200, empty, with Content-Length", w.Code, w.Body.Len())
			}
			for _, method := range []string{http.MethodPost, http.MethodPut, http.MethodDelete} {
				if w := get(t, h, method, nil); w.Code != http.StatusMethodNotAllowed || w.Header().Get("Allow") != "GET, HEAD" {
					t.Fatalf("%s: got %d, Allow %q; want 405, GET, HEAD", method, w.Code, w.Header().Get("Allow"))
				}
			}

			// A rotation publishes the next key at once, beside the old one.
			next, err := m.Rotate(ctx, keys.EdDSA)
			if err != nil {
				t.Fatal(err)
			}
			w = get(t, h, http.MethodGet, http.Header{"If-None-Match": {etag1}})
			if w.Code != http.StatusOK || w.Header().Get("ETag") == etag1 {
				t.Fatalf("after rotation: got %d, ETag %s; want 200 with a new ETag", w.Code, w.Header().Get("ETag"))
			}
			var doc struct {
				Keys []map[string]any `json:"keys"`
			}
			if err := json.Unmarshal(w.Body.Bytes(), &doc); err != nil {
				t.Fatal(err)
			}
			var kids []string
			for _, k := range doc.Keys {
				kids = append(kids, k["kid"].(string))
				for _, member := range []string{"kid", "use", "alg", "kty"} {
					if _, ok := k[member]; !ok {
						t.Fatalf("key %v lacks %q", k, member)
					}
				}
			}
			signer, _ := m.Signer()
			if want := []string{next.ID, signer.KeyID}; !slices.Equal(kids, want) {
				t.Fatalf("kids after rotation: got %v; want %v (newest first)", kids, want)
			}
		})
	}
}

// TestGolden pins the shape of the key set: one key per algorithm, with
// only public members. Key material is replaced by its length, the kid
// (random) by a placeholder.
func TestGolden(t *testing.T) {
	ctx := context.Background()
	m := keytest.Manager(t, keytest.Open(t, keytest.DBOptions(t, db.SQLite)), keytest.Options(keys.RS256, nil))
	for _, alg := range []string{keys.ES256, keys.EdDSA} {
		if _, err := m.Rotate(ctx, alg); err != nil {
			t.Fatal(err)
		}
	}
	w := get(t, jwks.NewHandler(m, m.KeySetMaxAge(), nil), http.MethodGet, nil)
	var doc struct {
		Keys []map[string]any `json:"keys"`
	}
	if err := json.Unmarshal(w.Body.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	for _, k := range doc.Keys {
		k["kid"] = "[kid]"
		for _, member := range []string{"n", "x", "y"} {
			if v, ok := k[member].(string); ok {
				k[member] = "[" + strconv.Itoa(len(v)) + " base64url characters]"
			}
		}
	}
	got, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	got = append(got, '\n')
	golden(t, "keys.golden.json", got)
}

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s differs (run go test -update after checking the change):\ngot:\n%s\nwant:\n%s", path, got, want)
	}
}

// BenchmarkKeySet is a GET of the key set (issue target ~0.07 ms of server
// CPU per request): two RS256 keys, as during a rotation.
func BenchmarkKeySet(b *testing.B) {
	m := keytest.Manager(b, keytest.Open(b, keytest.DBOptions(b, db.SQLite)), keytest.Options(keys.RS256, nil))
	if _, err := m.Rotate(context.Background(), ""); err != nil {
		b.Fatal(err)
	}
	h := jwks.NewHandler(m, m.KeySetMaxAge(), nil)
	r := httptest.NewRequest(http.MethodGet, jwks.Path, nil)
	b.ReportAllocs()
	for b.Loop() {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != http.StatusOK {
			b.Fatal(w.Code)
		}
	}
}
