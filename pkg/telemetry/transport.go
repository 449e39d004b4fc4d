package telemetry

import (
	"net/http"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.37.0"
	"go.opentelemetry.io/otel/trace"
)

// HTTPTransport wraps rt so each outgoing request runs in a client span,
// named by name (nil: "HTTP METHOD"), whose W3C trace context it carries.
//
// Like HTTPMiddleware it replaces otelhttp, whose transport builds every
// attribute and two histograms per request whether or not the span is
// recorded, and records url.full with its query string (authorization
// codes, id_token_hints). Here attributes are built only for a recorded
// span, the query is never recorded, and the span ends when the response
// headers arrive.
func HTTPTransport(rt http.RoundTripper, name func(*http.Request) string) http.RoundTripper {
	return &transport{next: rt, name: name, tracer: otel.Tracer(instrumentation), prop: otel.GetTextMapPropagator()}
}

type transport struct {
	next   http.RoundTripper
	name   func(*http.Request) string
	tracer trace.Tracer
	prop   propagation.TextMapPropagator
}

func (t *transport) RoundTrip(r *http.Request) (*http.Response, error) {
	name := "HTTP " + r.Method
	if t.name != nil {
		name = t.name(r)
	}
	ctx, span := t.tracer.Start(r.Context(), name, trace.WithSpanKind(trace.SpanKindClient))
	defer span.End()
	recording := span.IsRecording()
	if recording {
		span.SetAttributes(
			semconv.HTTPRequestMethodKey.String(r.Method),
			semconv.ServerAddress(r.URL.Hostname()),
			semconv.URLPath(r.URL.Path),
		)
	}
	// A RoundTripper must not modify its request: inject into a copy.
	out := r.WithContext(ctx)
	out.Header = r.Header.Clone()
	if out.Header == nil {
		out.Header = http.Header{}
	}
	t.prop.Inject(ctx, propagation.HeaderCarrier(out.Header))
	res, err := t.next.RoundTrip(out)
	if recording {
		switch {
		case err != nil:
			span.RecordError(err)
			span.SetStatus(codes.Error, "")
		default:
			span.SetAttributes(semconv.HTTPResponseStatusCode(res.StatusCode))
			if res.StatusCode >= 500 {
				span.SetStatus(codes.Error, "")
			}
		}
	}
	return res, err
}
