package router

import (
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/gatehouse-id/gatehouse/pkg/logging"
	"github.com/gatehouse-id/gatehouse/pkg/testutil/benchcpu"
	"github.com/gatehouse-id/gatehouse/services/edge/internal/edgetest"
	"github.com/gatehouse-id/gatehouse/services/edge/internal/proxy"
	"github.com/gatehouse-id/gatehouse/services/edge/internal/routes"
)

// BenchmarkABMicrocache is make bench-ab's pair (bench/README, "Hand-made
// machinery") for edge's one-second cache of discovery and the key set:
// the key set GET through edge to a service in another process (as
// distributed), answered from the cache (ab=hand) or proxied each time
// (ab=plain: the client's Cache-Control: no-cache makes the cache pass).
func BenchmarkABMicrocache(b *testing.B) {
	body := `{"keys":[{"kty":"RSA","use":"sig","alg":"RS256","kid":"1","n":"` + strings.Repeat("x", 342) + `","e":"AQAB"}]}`
	backend := edgetest.Start(b, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "public, max-age=300")
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		_, _ = io.WriteString(w, body)
	}))
	for _, arm := range []string{"hand", "plain"} {
		b.Run("ab="+arm, func(b *testing.B) {
			logger := logging.Discard()
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
			url := edgetest.Start(b, h).URL.String() + "/oauth/v2/keys"
			b.SetParallelism(8)
			b.ReportAllocs()
			m := benchcpu.Start(b)
			edgetest.Hammer(b, func() *http.Request {
				req, _ := http.NewRequest(http.MethodGet, url, nil)
				if arm == "plain" {
					req.Header.Set("Cache-Control", "no-cache")
				}
				return req
			})
			m.Report(b)
		})
	}
}
