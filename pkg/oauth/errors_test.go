package oauth

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
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

// An error knows its log level and attributes, so every logger of it
// agrees; the hint goes to the client beside the description, the cause
// only to the log.
func TestHintLevelAndLogValue(t *testing.T) {
	t.Parallel()
	refusal := New(InvalidRequest, "grant_type is required").WithHint("send grant_type=%s", "authorization_code")
	for _, tc := range []struct {
		err   *Error
		level slog.Level
		msg   string
	}{
		{refusal, slog.LevelDebug, "token request refused"},
		{New(InvalidGrant, "code expired").WithCause(errors.New("code c1 redeemed twice")), slog.LevelInfo, "token request refused"},
		{New(ServerError, "internal error").WithCause(errors.New("disk full")), slog.LevelError, "token request failed"},
		{New(TemporarilyUnavailable, "retry"), slog.LevelError, "token request failed"},
	} {
		var buf bytes.Buffer
		logger := slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
		tc.err.Log(context.Background(), logger, "token request")
		var rec map[string]any
		if err := json.Unmarshal(buf.Bytes(), &rec); err != nil {
			t.Fatal(err)
		}
		e, _ := rec["error"].(map[string]any)
		if tc.err.Level() != tc.level || rec["level"] != tc.level.String() || rec["msg"] != tc.msg ||
			e["code"] != tc.err.Code || e["description"] != tc.err.Description {
			t.Errorf("%v logged %v; want %s at %v", tc.err, rec, tc.msg, tc.level)
		}
		if c := tc.err.Unwrap(); c != nil && e["cause"] != c.Error() {
			t.Errorf("%v: cause not logged: %v", tc.err, rec)
		}
	}
	rec := httptest.NewRecorder()
	WriteJSON(rec, refusal.WithCause(errors.New("internal detail")))
	var b map[string]string
	if err := json.Unmarshal(rec.Body.Bytes(), &b); err != nil {
		t.Fatal(err)
	}
	if b["error_hint"] != "send grant_type=authorization_code" || b["error_description"] != "grant_type is required" || len(b) != 3 {
		t.Fatalf("body %v", b)
	}
}
