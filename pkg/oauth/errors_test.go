package oauth

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http/httptest"
	"testing"
)

func TestWriteJSON(t *testing.T) {
	cases := []struct {
		err        error
		status     int
		code       string
		authHeader bool
	}{
		{New(InvalidGrant, "code expired"), 400, InvalidGrant, false},
		{InvalidClientError(true, "bad secret"), 401, InvalidClient, true},
		{InvalidClientError(false, "bad secret"), 400, InvalidClient, false},
		{fmt.Errorf("db down: %w", errors.New("secret detail")), 500, ServerError, false},
	}
	for _, tc := range cases {
		rec := httptest.NewRecorder()
		WriteJSON(rec, tc.err)
		var b map[string]string
		if err := json.Unmarshal(rec.Body.Bytes(), &b); err != nil {
			t.Fatal(err)
		}
		if rec.Code != tc.status || b["error"] != tc.code || rec.Header().Get("Cache-Control") != "no-store" {
			t.Errorf("%v: %d %v; want %d %s", tc.err, rec.Code, b, tc.status, tc.code)
		}
		if (rec.Header().Get("WWW-Authenticate") != "") != tc.authHeader {
			t.Errorf("%v: WWW-Authenticate %q", tc.err, rec.Header().Get("WWW-Authenticate"))
		}
		if tc.status == 500 && b["error_description"] != "internal error" {
			t.Errorf("server_error leaks the cause: %v", b)
		}
	}
	wrapped := fmt.Errorf("ctx: %w", New(InvalidGrant, "x").WithCause(errors.New("y")))
	if !errors.Is(wrapped, ErrInvalidGrant) || errors.Is(wrapped, ErrInvalidClient) {
		t.Fatal("errors.Is by code broken")
	}
}
