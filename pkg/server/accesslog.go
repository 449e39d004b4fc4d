package server

import (
	"log/slog"
	"net/http"
	"time"

	"github.com/gatehouse-id/gatehouse/pkg/telemetry"
)

func accessLog(log *slog.Logger, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		path := r.URL.Path // before a handler (vanguard) rewrites it
		sw := &telemetry.StatusWriter{ResponseWriter: w}
		next.ServeHTTP(sw, r)
		log.InfoContext(r.Context(), "request",
			"method", r.Method,
			"path", path,
			"status", sw.Status(),
			"bytes", sw.Bytes,
			"duration_ms", float64(time.Since(start).Microseconds())/1000,
			"request_id", r.Header.Get("X-Request-Id"),
			// Read after the handler: a service process's handler is
			// rpc.GuardClientAddr, which settles it.
			"client", r.Header.Get("X-Real-Ip"),
			"proto", r.Proto,
		)
	})
}
