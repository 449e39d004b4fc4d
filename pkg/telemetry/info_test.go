package telemetry

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/attribute"
)

func TestInfoOnMetrics(t *testing.T) {
	tel, err := Setup(context.Background(), "test", Options{Getenv: func(string) string { return "" }})
	if err != nil {
		t.Fatal(err)
	}
	defer tel.Shutdown(context.Background())
	if err := Info("gatehouse.test.library", "A test fact.", attribute.String("library", "openssl"), attribute.String("version", "3.0")); err != nil {
		t.Fatal(err)
	}
	w := serve(t, tel.MetricsHandler(), http.MethodGet, "/metrics", nil)
	body, _ := io.ReadAll(w.Body)
	var line string
	for l := range strings.Lines(string(body)) {
		if strings.HasPrefix(l, "gatehouse_test_library{") {
			line = strings.TrimSpace(l)
		}
	}
	if !strings.Contains(line, `library="openssl"`) || !strings.Contains(line, `version="3.0"`) || !strings.HasSuffix(line, " 1") {
		t.Fatalf("/metrics line %q; want gatehouse_test_library{library=\"openssl\",version=\"3.0\",...} 1", line)
	}
}
