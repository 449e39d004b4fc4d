package router

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/gatehouse-id/gatehouse/pkg/logging"
	"github.com/gatehouse-id/gatehouse/services/edge/internal/edgetest"
	"github.com/gatehouse-id/gatehouse/services/edge/internal/proxy"
	"github.com/gatehouse-id/gatehouse/services/edge/internal/ratelimit"
	"github.com/gatehouse-id/gatehouse/services/edge/internal/routes"
)

// BenchmarkEdgeHop is what edge adds to a proxied request (the key set, as
// in make bench's keys scenario): the same GET sent to a bare backend and
// through edge (router, access log, proxy) to it, over loopback HTTP/1.1
// keep-alive. The difference of the two ns/op is edge's cost per request
// (both sides of its hop); -cpuprofile shows where it goes.
func BenchmarkEdgeHop(b *testing.B) {
	body := `{"keys":[{"kty":"RSA","use":"sig","alg":"RS256","kid":"1","n":"` + strings.Repeat("x", 342) + `","e":"AQAB"}]}`
	backend := edgetest.Start(b, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		// Not cacheable: edge's microcache would answer in its place.
		w.Header().Set("Cache-Control", "no-store")
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		_, _ = io.WriteString(w, body)
	}))
	logger := logging.New(io.Discard, slog.LevelInfo)
	services := map[routes.Service]http.Handler{}
	for _, svc := range routes.Services() {
		p, err := proxy.New(backend.URL, string(svc), logger)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(p.CloseIdleConnections)
		services[svc] = p
	}
	h, err := New(Options{Logger: logger, Services: services})
	if err != nil {
		b.Fatal(err)
	}
	edge := edgetest.Start(b, h)
	for _, c := range []struct{ name, url string }{
		{"direct", backend.URL.String() + "/oauth/v2/keys"},
		{"via-edge", edge.URL.String() + "/oauth/v2/keys"},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			edgetest.Hammer(b, func() *http.Request {
				req, _ := http.NewRequest(http.MethodGet, c.url, nil)
				return req
			})
		})
	}
}

// BenchmarkPipeline is edge's own work per request, without sockets: the
// router's pipeline in front of a service that answers at once, for a
// route of each kind (userinfo: CORS; a REST and a gRPC call: rate limited
// by token; a login page) and an unknown path.
func BenchmarkPipeline(b *testing.B) {
	backend := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"ok":true}`)
	})
	services := map[routes.Service]http.Handler{}
	for _, svc := range routes.Services() {
		services[svc] = backend
	}
	lim, err := ratelimit.NewMemory(1e9, 1e9)
	if err != nil {
		b.Fatal(err)
	}
	h, err := New(Options{Logger: logging.New(io.Discard, slog.LevelInfo), Services: services,
		Limiters: map[routes.Class]ratelimit.Limiter{routes.ClassAPI: lim}})
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct{ name, method, path, ctype string }{
		{"userinfo", http.MethodGet, "/oidc/v1/userinfo", ""},
		{"rest", http.MethodGet, "/management/v1/orgs/me", ""},
		{"grpc", http.MethodPost, "/gatehouse.management.v1.ManagementService/GetMyOrg", "application/grpc"},
		{"page", http.MethodGet, "/ui/login", ""},
		{"unknown", http.MethodGet, "/nowhere", ""},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				r := httptest.NewRequest(c.method, c.path, nil)
				r.RemoteAddr = "192.0.2.1:40000"
				r.Header.Set("Authorization", "Bearer abc")
				if c.ctype != "" {
					r.Header.Set("Content-Type", c.ctype)
				}
				w := httptest.NewRecorder()
				h.ServeHTTP(w, r)
				if w.Code != http.StatusOK && w.Code != http.StatusNotFound {
					b.Fatalf("status %d", w.Code)
				}
			}
		})
	}
}
