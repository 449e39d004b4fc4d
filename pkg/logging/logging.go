package logging

import (
	"context"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/mattn/go-isatty"
	"go.opentelemetry.io/otel/trace"
)

// Redacted replaces the value of a sensitive attribute.
const Redacted = "[REDACTED]"

// New returns a logger writing to w at level. JSON unless w is a terminal.
// Attributes named like secrets are redacted (IsSensitive), at any depth.
func New(w io.Writer, level slog.Leveler) *slog.Logger {
	opts := &slog.HandlerOptions{Level: level}
	under := w
	bw, buffered := w.(*BufferedWriter)
	if buffered {
		under = bw.w
	}
	var h slog.Handler
	if f, ok := under.(*os.File); ok && isTerminal(f) {
		h = slog.NewTextHandler(w, opts)
	} else {
		h = slog.NewJSONHandler(w, opts)
	}
	return slog.New(handler{h, bw})
}

func isTerminal(f *os.File) bool { return isatty.IsTerminal(f.Fd()) }

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

// sensitiveCache remembers IsSensitive per key: keys are program
// constants, and the check (lower-casing, a dozen substring searches) was a
// third of the cost of an access-log line. maxCached bounds it should a
// caller log attributes with data-derived keys.
var (
	sensitiveCache sync.Map // string → bool
	cached         atomic.Int32
)

const maxCached = 4096

func sensitiveKey(key string) bool {
	if v, ok := sensitiveCache.Load(key); ok {
		return v.(bool)
	}
	s := IsSensitive(key)
	if cached.Add(1) <= maxCached {
		sensitiveCache.Store(key, s)
	}
	return s
}

// needsRedaction reports whether a, or an attribute of a group within it,
// is named like a secret. LogValuers are resolved first, as the handler
// would resolve them.
func needsRedaction(a slog.Attr) bool {
	v := a.Value.Resolve()
	if v.Kind() != slog.KindGroup {
		return sensitiveKey(a.Key)
	}
	for _, g := range v.Group() {
		if needsRedaction(g) {
			return true
		}
	}
	return false
}

func redact(a slog.Attr) slog.Attr {
	v := a.Value.Resolve()
	if v.Kind() != slog.KindGroup {
		if sensitiveKey(a.Key) {
			return slog.String(a.Key, Redacted)
		}
		return slog.Attr{Key: a.Key, Value: v}
	}
	group := v.Group()
	out := make([]slog.Attr, len(group))
	for i, g := range group {
		out[i] = redact(g)
	}
	return slog.Attr{Key: a.Key, Value: slog.GroupValue(out...)}
}

// handler redacts secrets and adds trace_id and span_id of the record's
// context. Records are checked first and copied only when something must
// be redacted, which is rare: the common line costs a cache lookup per
// attribute.
type handler struct {
	slog.Handler
	buffered *BufferedWriter // flushed after Warn and above; may be nil
}

func (h handler) Handle(ctx context.Context, r slog.Record) error {
	// A LogValuer is resolved here to look inside it; the record is then
	// rebuilt with the resolved value so it is not resolved twice.
	dirty, hasID := false, false
	r.Attrs(func(a slog.Attr) bool {
		dirty = a.Value.Kind() == slog.KindLogValuer || needsRedaction(a)
		hasID = hasID || a.Key == "request_id"
		return !dirty
	})
	if dirty {
		clean := slog.NewRecord(r.Time, r.Level, r.Message, r.PC)
		r.Attrs(func(a slog.Attr) bool {
			clean.AddAttrs(redact(a))
			hasID = hasID || a.Key == "request_id"
			return true
		})
		r = clean
	}
	if id := RequestID(ctx); id != "" && !hasID {
		r.AddAttrs(slog.String("request_id", id))
	}
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		r.AddAttrs(slog.String("trace_id", sc.TraceID().String()), slog.String("span_id", sc.SpanID().String()))
	}
	err := h.Handler.Handle(ctx, r)
	if h.buffered != nil && r.Level >= slog.LevelWarn {
		if ferr := h.buffered.Flush(); err == nil {
			err = ferr
		}
	}
	return err
}

func (h handler) WithAttrs(as []slog.Attr) slog.Handler {
	clean := make([]slog.Attr, len(as))
	for i, a := range as {
		clean[i] = redact(a)
	}
	return handler{h.Handler.WithAttrs(clean), h.buffered}
}

func (h handler) WithGroup(name string) slog.Handler {
	return handler{h.Handler.WithGroup(name), h.buffered}
}

// Discard returns a logger that drops everything, for tests and benchmarks.
func Discard() *slog.Logger { return slog.New(slog.DiscardHandler) }
