package telemetry

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
)

func TestCounterOnMetrics(t *testing.T) {
	tel, err := Setup(context.Background(), "test", Options{Getenv: func(string) string { return "" }})
	if err != nil {
		t.Fatal(err)
	}
	defer tel.Shutdown(context.Background())
	c, err := NewCounter("gatehouse.test.rejected", "A test counter.", "class", "key")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	c.Inc(ctx, "browser", "address")
	c.Inc(ctx, "browser", "address")
	c.Inc(ctx, "client", "client")
	c.Inc(ctx, "api") // missing values are empty
	w := serve(t, tel.MetricsHandler(), http.MethodGet, "/metrics", nil)
	body, _ := io.ReadAll(w.Body)
	want := map[string]string{
		`class="browser",key="address"`: " 2",
		`class="client",key="client"`:   " 1",
		`class="api",key=""`:            " 1",
	}
	for l := range strings.Lines(string(body)) {
		if !strings.HasPrefix(l, "gatehouse_test_rejected_total{") {
			continue
		}
		for labels, value := range want {
			if strings.Contains(l, labels) && strings.HasSuffix(strings.TrimSpace(l), value) {
				delete(want, labels)
			}
		}
	}
	if len(want) > 0 {
		t.Fatalf("/metrics lacks %v:\n%s", want, body)
	}
}

func BenchmarkCounterInc(b *testing.B) {
	c, err := NewCounter("gatehouse.bench.counter", "", "class", "key")
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		c.Inc(ctx, "client", "client")
	}
}

// A package-level counter made before a process installs its meter
// provider (or before a test starts another process) counts into the
// current provider.
func TestCounterFollowsTheMeterProvider(t *testing.T) {
	early := MustCounter("gatehouse.test.early", "Made before Setup.")
	for i := range 2 {
		tel, err := Setup(context.Background(), "test", Options{Getenv: func(string) string { return "" }})
		if err != nil {
			t.Fatal(err)
		}
		early.Inc(context.Background())
		w := serve(t, tel.MetricsHandler(), http.MethodGet, "/metrics", nil)
		body, _ := io.ReadAll(w.Body)
		if !strings.Contains(string(body), "gatehouse_test_early_total{") {
			t.Fatalf("provider %d: the counter is not on /metrics:\n%s", i, body)
		}
		_ = tel.Shutdown(context.Background())
	}
}
