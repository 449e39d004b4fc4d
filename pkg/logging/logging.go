package logging

import (
	"context"
	"io"
	"log/slog"
	"os"
	"strings"

	"github.com/mattn/go-isatty"
	"go.opentelemetry.io/otel/trace"
)

// Redacted replaces the value of a sensitive attribute.
const Redacted = "[REDACTED]"

// New returns a logger writing to w at level. JSON unless w is a terminal.
func New(w io.Writer, level slog.Leveler) *slog.Logger {
	opts := &slog.HandlerOptions{Level: level, ReplaceAttr: redact}
	var h slog.Handler
	if f, ok := w.(*os.File); ok && isatty.IsTerminal(f.Fd()) {
		h = slog.NewTextHandler(w, opts)
	} else {
		h = slog.NewJSONHandler(w, opts)
	}
	return slog.New(traceHandler{h})
}

// sensitive lists key fragments that mark a secret. Matching is on the
// lower-cased key, so "client_secret", "clientSecret" and "Authorization" match.
var sensitive = []string{
	"password", "secret", "token", "assertion", "authorization", "cookie",
	"private", "master_key", "masterkey", "credential", "code_verifier", "otp",
}

// IsSensitive reports whether an attribute or field named key must never be
// logged in clear.
func IsSensitive(key string) bool {
	k := strings.ToLower(key)
	if k == "code" {
		return true // authorization codes
	}
	for _, s := range sensitive {
		if strings.Contains(k, s) {
			return true
		}
	}
	return false
}

func redact(groups []string, a slog.Attr) slog.Attr {
	if len(groups) == 0 {
		switch a.Key {
		case slog.TimeKey, slog.MessageKey:
			return a
		case slog.LevelKey:
			// With a ReplaceAttr set, slog hands the level over as an
			// Any value and encodes it with encoding/json, by reflection,
			// on every record; as a string it is the same JSON, cheaply.
			if l, ok := a.Value.Any().(slog.Level); ok {
				return slog.String(a.Key, l.String())
			}
			return a
		}
	}
	if a.Value.Kind() != slog.KindGroup && IsSensitive(a.Key) {
		return slog.String(a.Key, Redacted)
	}
	return a
}

// traceHandler adds trace_id and span_id of the record's context.
type traceHandler struct{ slog.Handler }

func (h traceHandler) Handle(ctx context.Context, r slog.Record) error {
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		r.AddAttrs(slog.String("trace_id", sc.TraceID().String()), slog.String("span_id", sc.SpanID().String()))
	}
	return h.Handler.Handle(ctx, r)
}

func (h traceHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return traceHandler{h.Handler.WithAttrs(as)}
}

func (h traceHandler) WithGroup(name string) slog.Handler {
	return traceHandler{h.Handler.WithGroup(name)}
}

// Discard returns a logger that drops everything, for tests and benchmarks.
func Discard() *slog.Logger { return slog.New(slog.DiscardHandler) }
