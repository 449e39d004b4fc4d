package oauth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"

	"github.com/gatehouse-id/gatehouse/pkg/db"
)

// Error codes.
const (
	InvalidRequest          = "invalid_request"
	InvalidClient           = "invalid_client"
	InvalidGrant            = "invalid_grant"
	UnauthorizedClient      = "unauthorized_client"
	UnsupportedGrantType    = "unsupported_grant_type"
	InvalidScope            = "invalid_scope"
	ServerError             = "server_error"
	TemporarilyUnavailable  = "temporarily_unavailable"
	UnsupportedResponseType = "unsupported_response_type"
	AccessDenied            = "access_denied"
	InteractionRequired     = "interaction_required"
	LoginRequired           = "login_required"
	ConsentRequired         = "consent_required"
	// UnmetAuthenticationRequirements: the requested acr cannot be met
	// without interaction (OpenID Connect Core Unmet Authentication
	// Requirements 1.0).
	UnmetAuthenticationRequirements = "unmet_authentication_requirements"
	InvalidToken                    = "invalid_token"
	UnsupportedTokenType            = "unsupported_token_type"
	InvalidRequestURI               = "invalid_request_uri"    // RFC 9101 §7, RFC 9126 §2.2
	InvalidRequestObject            = "invalid_request_object" // RFC 9101 §7
	// The device authorization grant's poll answers (RFC 8628 §3.5).
	AuthorizationPending = "authorization_pending"
	SlowDown             = "slow_down"
	ExpiredToken         = "expired_token"
	// DPoP (RFC 9449 §5, §8).
	InvalidDPoPProof = "invalid_dpop_proof"
	UseDPoPNonce     = "use_dpop_nonce"
	// InvalidTarget: a token exchange's audience or resource is not one
	// the server will issue for (RFC 8693 §2.2.2, RFC 8707 §2).
	InvalidTarget = "invalid_target"
)

// Error is an OAuth error response.
type Error struct {
	Code string
	// Description says what is wrong with the request (RFC 6749 §5.2
	// error_description).
	Description string
	// Hint, when set, says how to fix the request; it is sent as
	// error_hint beside the description and shown on error pages.
	Hint   string
	Status int
	// Header is set when the Authorization header carried the failed
	// credential: invalid_client is then 401 with WWW-Authenticate.
	Header http.Header
	cause  error
}

func (e *Error) Error() string {
	if e.cause != nil {
		return e.Code + ": " + e.Description + ": " + e.cause.Error()
	}
	return e.Code + ": " + e.Description
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.cause }

// Is matches another *Error by code, so errors.Is(err, oauth.ErrInvalidGrant) works.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code
}

// WithHint returns a copy with a hint on how to fix the request.
func (e *Error) WithHint(format string, args ...any) *Error {
	c := *e
	c.Hint = fmt.Sprintf(format, args...)
	return &c
}

// Failure reports whether the error is the server's (server_error,
// temporarily_unavailable) rather than a refusal of the request.
func (e *Error) Failure() bool { return e.Code == ServerError || e.Code == TemporarilyUnavailable }

// Level is the level every logger of e uses: Error for a failure, Info
// for a refusal with a cause (why the request was refused, which the
// client is not told), Debug for a plain refusal.
func (e *Error) Level() slog.Level {
	switch {
	case e.Failure():
		return slog.LevelError
	case e.cause != nil:
		return slog.LevelInfo
	}
	return slog.LevelDebug
}

// LogValue implements slog.LogValuer: the code, description, hint and
// status, and the cause (which is never sent to the client).
func (e *Error) LogValue() slog.Value {
	attrs := []slog.Attr{slog.String("code", e.Code), slog.String("description", e.Description), slog.Int("status", e.Status)}
	if e.Hint != "" {
		attrs = append(attrs, slog.String("hint", e.Hint))
	}
	if e.cause != nil {
		attrs = append(attrs, slog.String("cause", e.cause.Error()))
	}
	return slog.GroupValue(attrs...)
}

// Log logs e at its Level under "<what> failed" or "<what> refused".
func (e *Error) Log(ctx context.Context, logger *slog.Logger, what string) {
	msg := what + " refused"
	if e.Failure() {
		msg = what + " failed"
	}
	logger.Log(ctx, e.Level(), msg, "error", e)
}

// WithCause returns a copy carrying cause (logged, never sent).
func (e *Error) WithCause(cause error) *Error {
	c := *e
	c.cause = cause
	return &c
}

// Sentinels for errors.Is.
var (
	ErrInvalidRequest = &Error{Code: InvalidRequest}
	ErrInvalidClient  = &Error{Code: InvalidClient}
	ErrInvalidGrant   = &Error{Code: InvalidGrant}
	ErrInvalidScope   = &Error{Code: InvalidScope}
	ErrServerError    = &Error{Code: ServerError}
)

// New returns an error with code and a formatted description; the status
// is 400 except where RFC 6749 and 6750 say otherwise.
func New(code, format string, args ...any) *Error {
	status := http.StatusBadRequest
	switch code {
	case InvalidClient, InvalidToken:
		status = http.StatusUnauthorized
	case ServerError:
		status = http.StatusInternalServerError
	case TemporarilyUnavailable:
		status = http.StatusServiceUnavailable
	}
	return &Error{Code: code, Description: fmt.Sprintf(format, args...), Status: status}
}

// InvalidClientError is invalid_client. Per RFC 6749 §5.2 it is 401 with
// WWW-Authenticate when the client authenticated with the Authorization
// header, and 400 otherwise.
func InvalidClientError(viaHeader bool, format string, args ...any) *Error {
	e := New(InvalidClient, format, args...)
	if viaHeader {
		e.Header = http.Header{"Www-Authenticate": {`Basic realm="gatehouse"`}}
	} else {
		e.Status = http.StatusBadRequest
	}
	return e
}

// As returns err as an *Error, turning anything else into server_error
// (whose cause the caller should log).
//
// A storage outage (db.IsUnavailable), bare or as the cause of a
// server_error, is temporarily_unavailable instead: an outage is never a
// verdict on the client, its grant or its token.
func As(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		if e.Code == ServerError && db.IsUnavailable(e.Unwrap()) {
			return New(TemporarilyUnavailable, "storage temporarily unavailable; retry").WithCause(e.Unwrap())
		}
		return e
	}
	if db.IsUnavailable(err) {
		return New(TemporarilyUnavailable, "storage temporarily unavailable; retry").WithCause(err)
	}
	return New(ServerError, "internal error").WithCause(err)
}

// body is the RFC 6749 §5.2 JSON.
type body struct {
	Error       string `json:"error"`
	Description string `json:"error_description,omitempty"`
	Hint        string `json:"error_hint,omitempty"`
}

// WriteJSON writes err as an RFC 6749 §5.2 response with no-store caching.
func WriteJSON(w http.ResponseWriter, err error) {
	e := As(err)
	h := w.Header()
	for k, v := range e.Header {
		h[k] = v
	}
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	h.Set("Pragma", "no-cache")
	w.WriteHeader(e.Status)
	_ = json.NewEncoder(w).Encode(body{Error: e.Code, Description: e.Description, Hint: e.Hint})
}
