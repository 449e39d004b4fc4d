package telemetry

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"

	"connectrpc.com/otelconnect"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.37.0"
)

// Telemetry owns the process's tracer and meter providers.
type Telemetry struct {
	tracer   *sdktrace.TracerProvider
	meter    *sdkmetric.MeterProvider
	registry *prometheus.Registry
	// Exporting reports whether spans leave the process (OTLP configured).
	Exporting bool
}

// Options tune Setup; zero values are the production defaults.
type Options struct {
	// SpanExporter overrides the OTLP exporter (tests use an in-memory one).
	SpanExporter sdktrace.SpanExporter
	// Getenv reads OTEL_* variables; nil means os.Getenv.
	Getenv func(string) string
}

// Setup installs global providers for service (e.g. "tokens") and returns
// them for shutdown. Spans are always recorded so trace ids reach logs and
// downstream services; they are exported only when an OTLP endpoint is set.
func Setup(ctx context.Context, service string, o Options) (*Telemetry, error) {
	getenv := o.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	res, err := resource.Merge(resource.Default(), resource.NewSchemaless(
		semconv.ServiceName("gatehouse-"+service),
		semconv.ServiceNamespace("gatehouse"),
	))
	if err != nil {
		return nil, fmt.Errorf("telemetry resource: %w", err)
	}

	t := &Telemetry{}
	topts := []sdktrace.TracerProviderOption{sdktrace.WithResource(res)}
	exp := o.SpanExporter
	if exp == nil && (getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != "") {
		// The exporter reads the standard OTEL_EXPORTER_OTLP_* variables itself.
		exp, err = otlptracehttp.New(ctx)
		if err != nil {
			return nil, fmt.Errorf("otlp trace exporter: %w", err)
		}
	}
	if exp != nil {
		topts = append(topts, sdktrace.WithBatcher(exp))
		t.Exporting = true
	} else {
		// Nothing leaves the process: spans still get ids (for logs and for
		// the traceparent sent downstream) but record nothing, which costs
		// a few allocations instead of a span's attributes and events.
		topts = append(topts, sdktrace.WithSampler(sdktrace.NeverSample()))
	}
	t.tracer = sdktrace.NewTracerProvider(topts...)

	t.registry = prometheus.NewRegistry()
	t.registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	// Every series carries the service it comes from, so one dashboard can
	// tell edge's requests from the backends' without joining target_info.
	pexp, err := otelprom.New(otelprom.WithRegisterer(t.registry),
		otelprom.WithResourceAsConstantLabels(attribute.NewAllowKeysFilter(semconv.ServiceNameKey)))
	if err != nil {
		return nil, fmt.Errorf("prometheus exporter: %w", err)
	}
	t.meter = sdkmetric.NewMeterProvider(sdkmetric.WithResource(res), sdkmetric.WithReader(pexp))

	otel.SetTracerProvider(t.tracer)
	otel.SetMeterProvider(t.meter)
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
	return t, nil
}

// MetricsHandler serves the process's metrics in Prometheus text format.
func (t *Telemetry) MetricsHandler() http.Handler {
	return promhttp.HandlerFor(t.registry, promhttp.HandlerOpts{Registry: t.registry})
}

// Shutdown flushes pending spans and stops the providers.
func (t *Telemetry) Shutdown(ctx context.Context) error {
	return errors.Join(t.tracer.Shutdown(ctx), t.meter.Shutdown(ctx))
}

// ConnectInterceptor traces and measures Connect calls on either side. Remote
// span contexts are trusted: every caller of a Gatehouse service is edge or
// another Gatehouse service.
func ConnectInterceptor() (*otelconnect.Interceptor, error) {
	return otelconnect.NewInterceptor(otelconnect.WithTrustRemote())
}
