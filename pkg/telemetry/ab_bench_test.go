package telemetry

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"

	"github.com/gatehouse-id/gatehouse/pkg/testutil/benchcpu"
)

// BenchmarkABHTTPTelemetry is make bench-ab's pair (bench/README,
// "Hand-made machinery") for Gatehouse's HTTP tracing and metrics
// middleware: a GET of the key set through HTTPMiddleware (ab=hand) and
// through otelhttp.NewHandler (ab=plain), each creating and propagating a
// span and recording its metrics on the providers Setup installs.
func BenchmarkABHTTPTelemetry(b *testing.B) {
	tel, err := Setup(context.Background(), "bench", Options{Getenv: func(string) string { return "" }})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = tel.Shutdown(context.Background()) })
	next := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })
	for _, arm := range []string{"hand", "plain"} {
		b.Run("ab="+arm, func(b *testing.B) {
			h := HTTPMiddleware(next)
			if arm == "plain" {
				h = otelhttp.NewHandler(next, "edge")
			}
			b.ReportAllocs()
			m := benchcpu.Start(b)
			b.RunParallel(func(pb *testing.PB) {
				r := httptest.NewRequest(http.MethodGet, "/oauth/v2/keys", nil)
				for pb.Next() {
					h.ServeHTTP(httptest.NewRecorder(), r)
				}
			})
			m.Report(b)
		})
	}
}
