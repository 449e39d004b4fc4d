package discovery_test

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
	"testing"

	"github.com/gatehouse-id/gatehouse/pkg/db"
	"github.com/gatehouse-id/gatehouse/services/tokens/internal/discovery"
	"github.com/gatehouse-id/gatehouse/services/tokens/internal/keys"
	"github.com/gatehouse-id/gatehouse/services/tokens/internal/keys/keytest"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

func serve(t testing.TB, h http.Handler, method string, header http.Header) *httptest.ResponseRecorder {
	t.Helper()
	r := httptest.NewRequest(method, discovery.Path, nil)
	for k, v := range header {
		r.Header[k] = v
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

func decode(t *testing.T, w *httptest.ResponseRecorder) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(w.Body.Bytes(), &m); err != nil {
		t.Fatalf("decode document: %v", err)
	}
	return m
}

func strings(v any) []string {
	var out []string
	for _, s := range v.([]any) {
		out = append(out, s.(string))
	}
	return out
}

// TestGolden pins the whole document for an issuer whose published keys
// are RS256 (the configured algorithm) and ES256.
func TestGolden(t *testing.T) {
	m := keytest.Manager(t, keytest.Open(t, keytest.DBOptions(t, db.SQLite)), keytest.Options(keys.RS256, nil))
	if _, err := m.Rotate(context.Background(), keys.ES256); err != nil {
		t.Fatal(err)
	}
	w := serve(t, discovery.NewHandler("https://id.example.com", keys.RS256, m, nil), http.MethodGet, nil)
	if w.Code != http.StatusOK {
		t.Fatalf("status: got %d; want 200", w.Code)
	}
	var pretty bytes.Buffer
	if err := json.Indent(&pretty, w.Body.Bytes(), "", "  "); err != nil {
		t.Fatal(err)
	}
	pretty.WriteByte('\n')
	path := filepath.Join("testdata", "openid-configuration.golden.json")
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, pretty.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if !bytes.Equal(pretty.Bytes(), want) {
		t.Fatalf("%s differs (run go test -update after checking the change):\ngot:\n%s\nwant:\n%s", path, pretty.Bytes(), want)
	}
}

// TestDocument checks the rules behind the golden file: the members OIDC
// Discovery requires, endpoints under an issuer with a path, no members
// for what Gatehouse does not implement, HTTP behaviour, and the signing
// algorithms following the published keys.
func TestDocument(t *testing.T) {
	for _, d := range keytest.Dialects {
		t.Run(string(d), func(t *testing.T) {
			m := keytest.Manager(t, keytest.Open(t, keytest.DBOptions(t, d)), keytest.Options(keys.RS256, nil))
			h := discovery.NewHandler("https://example.com/gatehouse/", keys.ES256, m, keytest.Quiet)

			w := serve(t, h, http.MethodGet, nil)
			for k, want := range map[string]string{"Content-Type": "application/json", "Cache-Control": "public, max-age=300"} {
				if got := w.Header().Get(k); got != want {
					t.Fatalf("%s: got %q; want %q", k, got, want)
				}
			}
			doc := decode(t, w)
			for _, member := range []string{"issuer", "authorization_endpoint", "token_endpoint", "jwks_uri",
				"response_types_supported", "subject_types_supported", "id_token_signing_alg_values_supported"} {
				if _, ok := doc[member]; !ok {
					t.Fatalf("required member %q missing", member)
				}
			}
			if algs := strings(doc["request_object_signing_alg_values_supported"]); doc["request_parameter_supported"] != true ||
				!slices.Equal(algs, []string{keys.RS256, keys.ES256, keys.EdDSA}) || doc["request_uri_parameter_supported"] != false ||
				doc["pushed_authorization_request_endpoint"] != "https://example.com/gatehouse/oauth/v2/par" ||
				doc["require_pushed_authorization_requests"] != false {
				t.Fatalf("request objects and PAR: %v", doc)
			}
			if doc["backchannel_logout_supported"] != true || doc["backchannel_logout_session_supported"] != true {
				t.Fatalf("back-channel logout: supported %v, session %v; want both true",
					doc["backchannel_logout_supported"], doc["backchannel_logout_session_supported"])
			}
			for _, member := range []string{"frontchannel_logout_supported",
				"check_session_iframe", "userinfo_signing_alg_values_supported"} {
				if _, ok := doc[member]; ok {
					t.Fatalf("member %q present for something not implemented", member)
				}
			}
			if doc["issuer"] != "https://example.com/gatehouse" || doc["jwks_uri"] != "https://example.com/gatehouse/oauth/v2/keys" ||
				doc["end_session_endpoint"] != "https://example.com/gatehouse/oidc/v1/end_session" {
				t.Fatalf("issuer/endpoints: got %v, %v, %v", doc["issuer"], doc["jwks_uri"], doc["end_session_endpoint"])
			}
			// Only what a relying party can get: the published key's
			// algorithm, not the configured one before its key exists.
			if got := strings(doc["id_token_signing_alg_values_supported"]); !slices.Equal(got, []string{keys.RS256}) {
				t.Fatalf("signing algs: got %v; want [RS256]", got)
			}
			etag := w.Header().Get("ETag")
			if w := serve(t, h, http.MethodGet, http.Header{"If-None-Match": {etag}}); w.Code != http.StatusNotModified {
				t.Fatalf("If-None-Match: got %d; want 304", w.Code)
			}

			// Another RS256 key changes nothing; an EdDSA key is listed as soon
			// as it is published.
			if _, err := m.Rotate(context.Background(), keys.RS256); err != nil {
				t.Fatal(err)
			}
			if w := serve(t, h, http.MethodGet, nil); w.Header().Get("ETag") != etag {
				t.Fatalf("document changed though the algorithms did not")
			}
			if _, err := m.Rotate(context.Background(), keys.EdDSA); err != nil {
				t.Fatal(err)
			}
			// A key of another algorithm is listed once it is published.
			w = serve(t, h, http.MethodGet, http.Header{"If-None-Match": {etag}})
			if w.Code != http.StatusOK {
				t.Fatalf("after an EdDSA key: got %d; want 200 (a new document)", w.Code)
			}
			if got := strings(decode(t, w)["id_token_signing_alg_values_supported"]); !slices.Equal(got, []string{keys.RS256, keys.EdDSA}) {
				t.Fatalf("signing algs after an EdDSA key: %v; want [RS256 EdDSA]", got)
			}

			if w := serve(t, h, http.MethodHead, nil); w.Code != http.StatusOK || w.Body.Len() != 0 {
				t.Fatalf("HEAD: got %d with %d bytes", w.Code, w.Body.Len())
			}
			if w := serve(t, h, http.MethodPost, nil); w.Code != http.StatusMethodNotAllowed || w.Header().Get("Allow") != "GET, HEAD" {
				t.Fatalf("POST: got %d, Allow %q; want 405", w.Code, w.Header().Get("Allow"))
			}
		})
	}
}

// BenchmarkDiscovery is a GET of the document.
func BenchmarkDiscovery(b *testing.B) {
	m := keytest.Manager(b, keytest.Open(b, keytest.DBOptions(b, db.SQLite)), keytest.Options(keys.ES256, nil))
	h := discovery.NewHandler("https://id.example.com", keys.ES256, m, nil)
	r := httptest.NewRequest(http.MethodGet, discovery.Path, nil)
	b.ReportAllocs()
	for b.Loop() {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != http.StatusOK {
			b.Fatal(w.Code)
		}
	}
}
