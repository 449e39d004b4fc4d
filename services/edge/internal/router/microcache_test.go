package router

import (
	"net/http"
	"testing"

	"github.com/gatehouse-id/gatehouse/services/edge/internal/edgetest"
	"github.com/gatehouse-id/gatehouse/services/edge/internal/routes"
)

// Discovery and the key set, when the service marks them public, are
// answered from edge's microcache: the service sees the first GET only,
// and every answer still carries its own request id and edge's headers.
// Other routes always reach the service, whatever their Cache-Control.
func TestMetadataIsKeptBriefly(t *testing.T) {
	for _, mode := range modes {
		t.Run(mode, func(t *testing.T) {
			f := newFixture(t, mode, nil)
			tokens := f.backends[routes.Tokens]
			tokens.Respond = func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Cache-Control", "public, max-age=60")
				w.Header().Set("Content-Type", "application/json")
				_, _ = w.Write([]byte(`{"path":"` + r.URL.Path + `"}`))
			}
			c := edgetest.HTTP1Client(t)
			for _, p := range []string{"/oauth/v2/keys", "/.well-known/openid-configuration", "/oidc/v1/userinfo"} {
				tokens.Reset()
				ids := map[string]bool{}
				for range 3 {
					res, body := get(t, c, f.url(p), nil)
					if res.StatusCode != 200 || string(body) != `{"path":"`+p+`"}` {
						t.Fatalf("%s: %d %s", p, res.StatusCode, body)
					}
					if res.Header.Get("X-Content-Type-Options") != "nosniff" || res.Header.Get("Access-Control-Allow-Origin") != "*" {
						t.Fatalf("%s: edge's headers missing: %v", p, res.Header)
					}
					ids[res.Header.Get("X-Request-Id")] = true
				}
				if len(ids) != 3 {
					t.Fatalf("%s: request ids %v; want each answer its own", p, ids)
				}
				want := 1
				if p == "/oidc/v1/userinfo" {
					want = 3
				}
				if got := len(tokens.Requests()); got != want {
					t.Fatalf("%s: tokens saw %d of 3 GETs; want %d", p, got, want)
				}
			}
			if n := len(f.logs.lines(t)); n < 9 {
				t.Fatalf("%d access log lines; want one per request, answered from the cache or not", n)
			}
		})
	}
}
