package logging

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/gatehouse-id/gatehouse/pkg/testutil/benchcpu"
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

// BenchmarkABLogWriter is make bench-ab's pair (bench/README, "Hand-made
// machinery") for the buffered log writer: one access-log record like
// edge's, JSON to a file or a pipe, batched as process.Run does (ab=hand,
// see Buffer) and with a write system call per line (ab=plain); cpu-ns/op
// counts the system calls, which ns/op on a page-cache file understates.
func BenchmarkABLogWriter(b *testing.B) {
	for _, sink := range []string{"file", "pipe"} {
		for _, arm := range []string{"hand", "plain"} {
			b.Run(sink+"/ab="+arm, func(b *testing.B) {
				f := logSink(b, sink)
				var w io.Writer = f
				if arm == "hand" {
					bw, closeLog := Buffer(f)
					defer closeLog()
					w = bw
				}
				log := New(w, slog.LevelInfo).With("process", "edge")
				ctx := context.Background()
				b.ReportAllocs()
				m := benchcpu.Start(b)
				for range b.N {
					log.LogAttrs(ctx, slog.LevelInfo, "request",
						slog.String("method", "POST"), slog.String("path", "/oauth/v2/token"), slog.Int("status", 200),
						slog.Int("bytes", 812), slog.Float64("duration_ms", 0.131), slog.String("client", "127.0.0.1"),
						slog.String("request_id", "0123456789abcdef0123456789abcdef"), slog.String("service", "tokens"),
						slog.String("proto", "HTTP/1.1"))
				}
				m.Report(b)
			})
		}
	}
}

// logSink is a file, or a pipe drained by a reader in this process (as a
// container runtime reads a process's stderr; its CPU is counted too).
func logSink(b *testing.B, kind string) *os.File {
	b.Helper()
	if kind == "file" {
		f, err := os.Create(filepath.Join(b.TempDir(), "log"))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { f.Close() })
		return f
	}
	r, w, err := os.Pipe()
	if err != nil {
		b.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, r)
		close(done)
	}()
	b.Cleanup(func() {
		w.Close()
		<-done
		r.Close()
	})
	return w
}

// Levels come out as slog's JSON handler writes them, custom levels included.
func TestLevelNames(t *testing.T) {
	for _, c := range []struct {
		level slog.Level
		want  string
	}{{slog.LevelInfo, "INFO"}, {slog.LevelWarn, "WARN"}, {slog.LevelError, "ERROR"}, {slog.LevelInfo + 2, "INFO+2"}} {
		var buf bytes.Buffer
		New(&buf, slog.LevelDebug).Log(context.Background(), c.level, "m")
		var m map[string]any
		if err := json.Unmarshal(buf.Bytes(), &m); err != nil {
			t.Fatal(err)
		}
		if m["level"] != c.want {
			t.Errorf("level %d: got %v; want %q", c.level, m["level"], c.want)
		}
	}
}

type secretValuer struct{}

func (secretValuer) LogValue() slog.Value {
	return slog.GroupValue(slog.String("client_secret", "valuer-secret"), slog.String("id", "c1"))
}

func TestRedactsWithAttrsAndLogValuers(t *testing.T) {
	var buf bytes.Buffer
	log := New(&buf, slog.LevelInfo).With("password", "with-secret", "process", "p")
	log.Info("x", "client", secretValuer{})
	out := buf.String()
	for _, leaked := range []string{"with-secret", "valuer-secret"} {
		if strings.Contains(out, leaked) {
			t.Errorf("log line leaks %q: %s", leaked, out)
		}
	}
	if !strings.Contains(out, `"id":"c1"`) || !strings.Contains(out, `"process":"p"`) {
		t.Errorf("safe attributes lost: %s", out)
	}
}
