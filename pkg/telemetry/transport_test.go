package telemetry

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

func TestHTTPTransportPropagatesAndHidesQuery(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tel, err := Setup(context.Background(), "test", Options{SpanExporter: exp, Getenv: func(string) string { return "" }})
	if err != nil {
		t.Fatal(err)
	}
	defer tel.Shutdown(context.Background())
	var gotParent string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotParent = r.Header.Get("traceparent")
		w.WriteHeader(http.StatusBadGateway)
	}))
	defer srv.Close()

	rt := HTTPTransport(http.DefaultTransport, func(r *http.Request) string { return "edge→tokens " + r.Method })
	req, _ := http.NewRequest(http.MethodGet, srv.URL+"/oauth/v2/authorize?code=secret-code", nil)
	req.Header.Set("X-Request-Id", "r1")
	res, err := rt.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if req.Header.Get("traceparent") != "" || len(req.Header) != 1 {
		t.Errorf("caller's request was modified: %v", req.Header)
	}
	if err := tel.tracer.ForceFlush(context.Background()); err != nil {
		t.Fatal(err)
	}
	spans := exp.GetSpans()
	if len(spans) != 1 {
		t.Fatalf("got %d spans; want 1", len(spans))
	}
	s := spans[0]
	if s.Name != "edge→tokens GET" || s.SpanKind != trace.SpanKindClient || s.Status.Code.String() != "Error" {
		t.Errorf("span %q kind %v status %v; want edge→tokens GET, client, Error", s.Name, s.SpanKind, s.Status)
	}
	want := "00-" + s.SpanContext.TraceID().String() + "-" + s.SpanContext.SpanID().String() + "-01"
	if gotParent != want {
		t.Errorf("server saw traceparent %q; want %q", gotParent, want)
	}
	for _, a := range s.Attributes {
		if strings.Contains(a.Value.String(), "secret-code") {
			t.Errorf("attribute %s = %q carries the query string", a.Key, a.Value.String())
		}
		if a.Key == "http.response.status_code" && a.Value.AsInt64() != 502 {
			t.Errorf("status attribute %d; want 502", a.Value.AsInt64())
		}
	}
}

// Without an exporter spans are not recorded, but the trace context still
// reaches the service so its logs carry the same trace id.
func TestHTTPTransportWithoutExporterStillPropagates(t *testing.T) {
	tel, err := Setup(context.Background(), "test", Options{Getenv: func(string) string { return "" }})
	if err != nil {
		t.Fatal(err)
	}
	defer tel.Shutdown(context.Background())
	var gotParent string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotParent = r.Header.Get("traceparent")
	}))
	defer srv.Close()
	ctx, span := tel.tracer.Tracer("t").Start(context.Background(), "parent")
	defer span.End()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
	res, err := HTTPTransport(http.DefaultTransport, nil).RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if !strings.HasPrefix(gotParent, "00-"+span.SpanContext().TraceID().String()+"-") {
		t.Errorf("server saw traceparent %q; want trace %s", gotParent, span.SpanContext().TraceID())
	}
}
