package apierror

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestWrite(t *testing.T) {
	rec := httptest.NewRecorder()
	Write(rec, http.StatusServiceUnavailable, TemporarilyUnavailable, `tokens "service" unavailable`)
	if rec.Code != http.StatusServiceUnavailable {
		t.Fatalf("got status %d; want 503", rec.Code)
	}
	if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
		t.Fatalf("got content type %q; want application/json", ct)
	}
	var got map[string]string
	if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
		t.Fatalf("body %q is not JSON: %v", rec.Body.String(), err)
	}
	if got["error"] != TemporarilyUnavailable || got["error_description"] != `tokens "service" unavailable` {
		t.Fatalf("got body %v; want error and escaped description", got)
	}

	rec = httptest.NewRecorder()
	Write(rec, http.StatusNotFound, NotFound, "")
	if rec.Body.String() != "{\"error\":\"not_found\"}\n" {
		t.Fatalf("got body %q; want only the error field", rec.Body.String())
	}
}
