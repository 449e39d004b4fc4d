// Package telemetry sets up OpenTelemetry for a process: traces exported over
// OTLP/HTTP when OTEL_EXPORTER_OTLP_ENDPOINT (or the traces-specific variable)
// is set, W3C trace-context propagation, and metrics served in Prometheus
// format on /metrics. It also gives the Connect interceptor and HTTP
// middleware every service uses, so spans continue across services.
package telemetry
