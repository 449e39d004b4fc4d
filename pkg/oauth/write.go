package oauth

import (
	"log/slog"
	"net/http"

	"github.com/gatehouse-id/gatehouse/pkg/telemetry"
)

// RetryAfter is the Retry-After (seconds) of every temporarily_unavailable
// answer.
const RetryAfter = "5"

// Write is the one error writer of the OAuth endpoints: it turns a
// storage outage into temporarily_unavailable (503), sets Retry-After on
// every 503, logs failures at Error and refusals (with their reason) at
// Info under "<what> failed" / "<what> refused", and writes the RFC 6749
// §5.2 JSON. Endpoint-specific headers (challenges) go into the error's
// Header or the response before the call.
func Write(w http.ResponseWriter, r *http.Request, logger *slog.Logger, what string, err error) {
	oe := As(err)
	if oe.Status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", RetryAfter)
		telemetry.Unavailable(r.Context(), "oauth")
	}
	switch {
	case oe.Code == ServerError || oe.Code == TemporarilyUnavailable:
		logger.ErrorContext(r.Context(), what+" failed", "error", oe.Code, "err", err)
	case oe.Unwrap() != nil:
		logger.InfoContext(r.Context(), what+" refused", "error", oe.Code, "reason", oe.Unwrap())
	}
	WriteJSON(w, oe)
}
