package server

import (
	"log/slog"
	"net/http"
	"time"

	"github.com/gatehouse-id/gatehouse/pkg/telemetry"
)

// accessLog logs each request a service process serves: at debug level,
// or warn for a 5xx. Edge's access log, at info, is the log of record for
// every public request, with the same request_id; a service's own line
// repeated it for each forwarded request at about a sixth of a small
// request's CPU in that service (17% of the key set's), so it is kept for
// debugging (GATEHOUSE_LOG_LEVEL=debug) and for failures.
func accessLog(log *slog.Logger, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		path := r.URL.Path // before a handler (vanguard) rewrites it
		sw := &telemetry.StatusWriter{ResponseWriter: w}
		next.ServeHTTP(sw, r)
		level := slog.LevelDebug
		if sw.Status() >= 500 {
			level = slog.LevelWarn
		}
		ctx := r.Context()
		if !log.Enabled(ctx, level) {
			return
		}
		log.LogAttrs(ctx, level, "request",
			slog.String("method", r.Method),
			slog.String("path", path),
			slog.Int("status", sw.Status()),
			slog.Int64("bytes", sw.Bytes),
			slog.Float64("duration_ms", float64(time.Since(start).Microseconds())/1000),
			slog.String("request_id", r.Header.Get("X-Request-Id")),
			// Read after the handler: a service process's handler is
			// rpc.GuardClientAddr, which settles it.
			slog.String("client", r.Header.Get("X-Real-Ip")),
			slog.String("proto", r.Proto),
		)
	})
}
