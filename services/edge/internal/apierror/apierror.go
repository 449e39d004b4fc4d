package apierror

import (
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/gatehouse-id/gatehouse/services/edge/internal/reqinfo"
)

// Error codes edge answers with.
const (
	NotFound               = "not_found"
	RateLimited            = "rate_limited"
	RequestTooLarge        = "request_too_large"
	TemporarilyUnavailable = "temporarily_unavailable"
	ServerError            = "server_error"
)

type body struct {
	Error       string `json:"error"`
	Description string `json:"error_description,omitempty"`
}

// Respond answers in the form r's route calls for (reqinfo.Info.Errors):
// a request for a page (a top-level navigation: authorize, end_session, the
// login pages, the IdP callback) gets an HTML page a person can read
// (WritePage), since a browser shows JSON as a wall of text and a person at
// it can do nothing with it; a gRPC, gRPC-web or Connect request to an RPC
// route or to no route gets the error in its protocol (WriteRPC); every
// other request gets the JSON error (Write).
func Respond(w http.ResponseWriter, r *http.Request, status int, code, description string) {
	if info := reqinfo.FromContext(r.Context()); info != nil && info.Errors == reqinfo.ErrorsPage {
		WritePage(w, status, code, description)
		return
	}
	if WriteRPC(w, r, code, description) {
		return
	}
	Write(w, status, code, description)
}

// Write answers status with {"error": code, "error_description": description}.
// Responses are never cached: they describe a transient condition or a
// client mistake, not the resource.
func Write(w http.ResponseWriter, status int, code, description string) {
	b, err := json.Marshal(body{Error: code, Description: description})
	if err != nil {
		// Marshaling two strings cannot fail; keep the status regardless.
		b = []byte(`{"error":"server_error"}`)
	}
	b = append(b, '\n')
	write(w, status, "application/json", b)
}

// write sends body as an error answer of status: never cached.
func write(w http.ResponseWriter, status int, contentType string, body []byte) {
	h := w.Header()
	h.Set("Content-Type", contentType)
	h.Set("Content-Length", strconv.Itoa(len(body)))
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}
