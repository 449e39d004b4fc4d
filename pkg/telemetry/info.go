package telemetry

import (
	"context"
	"fmt"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// Info publishes a constant gauge of value 1 whose attributes carry facts
// about the process (the Prometheus "info" idiom), such as which library
// signs tokens: `<name>{library="openssl",version="..."} 1` on /metrics.
func Info(name, description string, attrs ...attribute.KeyValue) error {
	set := metric.WithAttributeSet(attribute.NewSet(attrs...))
	_, err := otel.Meter(instrumentation).Int64ObservableGauge(name,
		metric.WithDescription(description),
		metric.WithInt64Callback(func(_ context.Context, o metric.Int64Observer) error {
			o.Observe(1, set)
			return nil
		}))
	if err != nil {
		return fmt.Errorf("info metric %s: %w", name, err)
	}
	return nil
}

// Flag publishes a gauge that is 1 while on() is true and 0 otherwise
// (a degraded mode, such as the rate limiter's fallback).
func Flag(name, description string, on func() bool) error {
	_, err := otel.Meter(instrumentation).Int64ObservableGauge(name,
		metric.WithDescription(description),
		metric.WithInt64Callback(func(_ context.Context, o metric.Int64Observer) error {
			v := int64(0)
			if on() {
				v = 1
			}
			o.Observe(v)
			return nil
		}))
	if err != nil {
		return fmt.Errorf("flag metric %s: %w", name, err)
	}
	return nil
}

// CounterFunc publishes a counter whose total value() reads, for totals a
// package keeps itself (such as the password hashes run and their CPU
// time): `<name>_<unit>_total` on /metrics. unit is UCUM ("s", "1").
func CounterFunc(name, unit, description string, value func() float64) error {
	_, err := otel.Meter(instrumentation).Float64ObservableCounter(name,
		metric.WithDescription(description),
		metric.WithUnit(unit),
		metric.WithFloat64Callback(func(_ context.Context, o metric.Float64Observer) error {
			o.Observe(value())
			return nil
		}))
	if err != nil {
		return fmt.Errorf("counter metric %s: %w", name, err)
	}
	return nil
}
