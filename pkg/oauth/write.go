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
// every 503, logs the error (Error.Log: at its own level, under
// "<what> failed" / "<what> refused"), and writes the RFC 6749 §5.2 JSON. Endpoint-specific headers (challenges) go into the error's
// Header or the response before the call.
func Write(w http.ResponseWriter, r *http.Request, logger *slog.Logger, what string, err error) {
	oe := As(err)
	if oe.Status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", RetryAfter)
		telemetry.Unavailable(r.Context(), "oauth")
	}
	oe.Log(r.Context(), logger, what)
	WriteJSON(w, oe)
}
