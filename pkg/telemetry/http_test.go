package telemetry

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

const parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

func serve(t *testing.T, h http.Handler, method, target string, hdr map[string]string) *httptest.ResponseRecorder {
	t.Helper()
	r := httptest.NewRequest(method, target, nil)
	for k, v := range hdr {
		r.Header.Set(k, v)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

func TestHTTPMiddlewareRecordsSpansWhenExporting(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tel, err := Setup(context.Background(), "test", Options{SpanExporter: exp, Getenv: func(string) string { return "" }})
	if err != nil {
		t.Fatal(err)
	}
	defer tel.Shutdown(context.Background())
	var inner trace.SpanContext
	mux := http.NewServeMux()
	mux.HandleFunc("/oauth/v2/token", func(w http.ResponseWriter, r *http.Request) {
		inner = trace.SpanContextFromContext(r.Context())
		w.WriteHeader(http.StatusServiceUnavailable)
	})
	// A router that is not a ServeMux names its route itself; ids in the
	// path never reach the span name.
	mux.HandleFunc("/management/v1/", func(w http.ResponseWriter, r *http.Request) {
		SetRoute(r.Context(), "/management/v1/*")
	})
	h := HTTPMiddleware(mux)
	serve(t, h, http.MethodPost, "/oauth/v2/token?code=secret", map[string]string{"traceparent": parent})
	serve(t, h, http.MethodGet, "/management/v1/users/384752234", nil)
	if err := tel.tracer.ForceFlush(context.Background()); err != nil {
		t.Fatal(err)
	}
	spans := exp.GetSpans()
	if len(spans) != 2 {
		t.Fatalf("got %d spans; want 2", len(spans))
	}
	if name := spans[1].Name; name != "GET /management/v1/*" {
		t.Errorf("span %q; want the route, without the id", name)
	}
	s := spans[0]
	if s.Name != "POST /oauth/v2/token" || s.SpanKind != trace.SpanKindServer {
		t.Errorf("span %q kind %v; want \"POST /oauth/v2/token\" server", s.Name, s.SpanKind)
	}
	if got := s.SpanContext.TraceID().String(); got != "4bf92f3577b34da6a3ce929d0e0e4736" || s.Parent.SpanID().String() != "00f067aa0ba902b7" {
		t.Errorf("trace %s parent %s; want the caller's", got, s.Parent.SpanID())
	}
	if inner.SpanID() != s.SpanContext.SpanID() {
		t.Errorf("handler saw span %s; want the server span %s", inner.SpanID(), s.SpanContext.SpanID())
	}
	attrs := map[string]string{}
	for _, a := range s.Attributes {
		attrs[string(a.Key)] = a.Value.String()
	}
	if attrs["http.response.status_code"] != "503" || attrs["url.path"] != "/oauth/v2/token" || s.Status.Code.String() != "Error" {
		t.Errorf("attributes %v status %v; want 503, the path, Error", attrs, s.Status)
	}
	for k, v := range attrs {
		if strings.Contains(v, "secret") {
			t.Errorf("attribute %s = %q carries the query string", k, v)
		}
	}
	// The histogram is served on /metrics with method and status.
	w := serve(t, tel.MetricsHandler(), http.MethodGet, "/metrics", nil)
	body, _ := io.ReadAll(w.Body)
	if !strings.Contains(string(body), `http_server_request_duration_seconds_count{http_request_method="POST",http_response_status_code="503"`) {
		t.Errorf("/metrics lacks the request's duration sample:\n%.3000s", body)
	}
}

func TestHTTPMiddlewareWithoutExporterKeepsTraceIDs(t *testing.T) {
	tel, err := Setup(context.Background(), "test", Options{Getenv: func(string) string { return "" }})
	if err != nil {
		t.Fatal(err)
	}
	defer tel.Shutdown(context.Background())
	var fromCaller, fresh trace.SpanContext
	var flushed bool
	h := HTTPMiddleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sc := trace.SpanContextFromContext(r.Context())
		if r.Header.Get("traceparent") != "" {
			fromCaller = sc
		} else {
			fresh = sc
		}
		if f, ok := w.(http.Flusher); ok {
			f.Flush()
			flushed = true
		}
	}))
	serve(t, h, http.MethodGet, "/x", map[string]string{"traceparent": parent})
	serve(t, h, http.MethodGet, "/x", nil)
	if fromCaller.TraceID().String() != "4bf92f3577b34da6a3ce929d0e0e4736" {
		t.Errorf("trace id %s; want the caller's", fromCaller.TraceID())
	}
	if !fresh.IsValid() || fresh.TraceID() == fromCaller.TraceID() {
		t.Errorf("a request without traceparent got span context %v; want a new valid one", fresh)
	}
	if !flushed {
		t.Error("the middleware's writer hides http.Flusher")
	}
}

func BenchmarkHTTPMiddleware(b *testing.B) {
	tel, err := Setup(context.Background(), "bench", Options{Getenv: func(string) string { return "" }})
	if err != nil {
		b.Fatal(err)
	}
	defer tel.Shutdown(context.Background())
	h := HTTPMiddleware(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) }))
	r := httptest.NewRequest(http.MethodGet, "/oauth/v2/keys", nil)
	w := httptest.NewRecorder()
	b.ReportAllocs()
	for b.Loop() {
		h.ServeHTTP(w, r)
	}
}
