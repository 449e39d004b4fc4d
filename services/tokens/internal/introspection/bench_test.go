package introspection_test

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/gatehouse-id/gatehouse/pkg/db"
	"github.com/gatehouse-id/gatehouse/pkg/testutil/benchcpu"
	"github.com/gatehouse-id/gatehouse/services/tokens/internal/introspection"
	"github.com/gatehouse-id/gatehouse/services/tokens/internal/introspection/tokentest"
	"github.com/gatehouse-id/gatehouse/services/tokens/internal/keys"
)

// BenchmarkIntrospectJWT is one introspection of an active JWT access
// token by an API app with client_secret_basic, through the handler: form
// parsing, client authentication (cached client, HMAC secret check),
// signature verification, the revocation check (memory list on SQLite),
// claims from the directory (an in-memory fake here, so the directory's own
// cost is not included) and the JSON answer. Issue target: ≤ 0.2 ms of
// server CPU; cpu-ns/op is the process's user+system CPU per request, GC
// included. The HTTP server's own cost (~45 µs) comes on top.
func BenchmarkIntrospectJWT(b *testing.B) {
	for _, alg := range []string{keys.RS256, keys.ES256} {
		b.Run(alg, func(b *testing.B) {
			env := tokentest.New(b, db.SQLite, tokentest.Options{Algorithm: alg})
			api := env.AddClient(b, "api-basic", "proj-api", apiApp, basic)
			web := env.AddClient(b, "web", "proj-api", oidcApp, basic)
			env.Dir.PutUser(tokentest.Alice())
			at := env.Access(b, web.Client, "user-alice", true, "openid", "profile", "email")
			h := introspection.NewEndpoint(env.Validator, env.Auth, env.Dir, tokentest.Quiet)
			body := url.Values{"token": {at.Token}}.Encode()
			run := func() {
				r := httptest.NewRequest(http.MethodPost, introspection.Path, strings.NewReader(body))
				r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
				r.SetBasicAuth("api-basic", api.Secret)
				w := httptest.NewRecorder()
				h.ServeHTTP(w, r)
				if w.Code != http.StatusOK || !strings.HasPrefix(w.Body.String(), `{"active":true`) {
					b.Fatalf("got %d %s", w.Code, w.Body)
				}
			}
			run()
			b.ReportAllocs()
			m := benchcpu.Start(b)
			for b.Loop() {
				run()
			}
			m.Report(b)
		})
	}
}
