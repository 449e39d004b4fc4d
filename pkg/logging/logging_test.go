package logging

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

func TestRedactsSecretsAndAddsTrace(t *testing.T) {
	var buf bytes.Buffer
	log := New(&buf, slog.LevelInfo)
	tp := sdktrace.NewTracerProvider()
	ctx, span := tp.Tracer("t").Start(context.Background(), "op")
	log.InfoContext(ctx, "hello",
		"client_secret", "s3cr3t-value",
		"password", "hunter2",
		"Authorization", "Bearer abc.def",
		"code", "authcode123",
		slog.Group("req", "refresh_token", "rt-value", "path", "/oauth/v2/token"),
		"user_id", "u1")
	span.End()
	out := buf.String()
	for _, leaked := range []string{"s3cr3t-value", "hunter2", "abc.def", "authcode123", "rt-value"} {
		if strings.Contains(out, leaked) {
			t.Errorf("log line leaks %q: %s", leaked, out)
		}
	}
	var m map[string]any
	if err := json.Unmarshal(buf.Bytes(), &m); err != nil {
		t.Fatalf("not JSON (stderr is not a terminal here): %v: %s", err, out)
	}
	if m["user_id"] != "u1" {
		t.Errorf("user_id = %v; want u1", m["user_id"])
	}
	if got, want := m["trace_id"], span.SpanContext().TraceID().String(); got != want {
		t.Errorf("trace_id = %v; want %v", got, want)
	}
	req, _ := m["req"].(map[string]any)
	if req["path"] != "/oauth/v2/token" || req["refresh_token"] != Redacted {
		t.Errorf("group = %v; want path kept and refresh_token redacted", req)
	}
}

func TestLevel(t *testing.T) {
	var buf bytes.Buffer
	log := New(&buf, slog.LevelWarn)
	log.Info("dropped")
	if buf.Len() != 0 {
		t.Fatalf("info logged at warn level: %s", buf.String())
	}
	log.Warn("kept")
	if !strings.Contains(buf.String(), "kept") {
		t.Fatalf("warn not logged")
	}
}
