package router

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/gatehouse-id/gatehouse/services/edge/internal/edgetest"
	"github.com/gatehouse-id/gatehouse/services/edge/internal/routes"
)

// FuzzRequestID: whatever X-Request-Id values a client sends (none, one,
// two; any bytes a header can carry), the response carries exactly one,
// the service received exactly that one, and the access log records it:
// the client's first value when it is sane (1–128 of [A-Za-z0-9._-]),
// otherwise a fresh 32-hex-digit id.
func FuzzRequestID(f *testing.F) {
	var logs bytes.Buffer
	backend := &edgetest.Backend{Name: "tokens"}
	services := map[routes.Service]http.Handler{}
	for _, svc := range routes.Services() {
		services[svc] = backend
	}
	h, err := New(Options{Logger: slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})), Services: services})
	if err != nil {
		f.Fatal(err)
	}
	f.Add(uint8(0), "", "")
	f.Add(uint8(1), "Abc-123_x.y", "")
	f.Add(uint8(1), "has space", "")
	f.Add(uint8(1), "0123456789012345678901234567890123456789012345678901234567890123456789012345678901234567890123456789012345678901234567", "")
	f.Add(uint8(1), "ünïcode", "")
	f.Add(uint8(1), `a"b`, "")
	f.Add(uint8(2), "one", "two")
	f.Add(uint8(2), "same", "same")
	f.Fuzz(func(t *testing.T, n uint8, a, b string) {
		var sent []string
		for _, v := range []string{a, b}[:n%3] {
			if !validHeaderValue(v) {
				return
			}
			sent = append(sent, v)
		}
		logs.Reset()
		backend.Reset()
		r := httptest.NewRequest(http.MethodGet, "/oauth/v2/keys", nil)
		r.RemoteAddr = "192.0.2.1:1234"
		if sent != nil {
			r.Header["X-Request-Id"] = sent
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)

		got := w.Result().Header.Values("X-Request-Id")
		if len(got) != 1 {
			t.Fatalf("sent %q: response X-Request-Id %q; want exactly one", sent, got)
		}
		id := got[0]
		if len(sent) > 0 && saneRequestID(sent[0]) {
			if id != sent[0] {
				t.Fatalf("sent the sane %q: echoed %q", sent[0], id)
			}
		} else if !generatedID.MatchString(id) {
			t.Fatalf("sent %q: echoed %q; want a generated id", sent, id)
		}
		reqs := backend.Requests()
		if len(reqs) != 1 {
			t.Fatalf("the service got %d requests; want 1", len(reqs))
		}
		if fwd := reqs[0].Header.Values("X-Request-Id"); len(fwd) != 1 || fwd[0] != id {
			t.Fatalf("sent %q: the service got X-Request-Id %q; want [%q]", sent, fwd, id)
		}
		if logged := accessLogID(t, logs.Bytes()); logged != id {
			t.Fatalf("sent %q: the access log says request_id %q; want %q", sent, logged, id)
		}
	})
}

// validHeaderValue reports whether net/http would send v as a header
// value (no CR, LF or NUL; other control bytes are refused by clients
// too, so they are left out).
func validHeaderValue(v string) bool {
	for i := 0; i < len(v); i++ {
		if c := v[i]; c < ' ' && c != '\t' || c == 0x7f {
			return false
		}
	}
	return true
}

// accessLogID returns the request_id of the access log line in logs.
func accessLogID(t *testing.T, logs []byte) string {
	t.Helper()
	for _, line := range bytes.Split(bytes.TrimSpace(logs), []byte("\n")) {
		var rec map[string]any
		if err := json.Unmarshal(line, &rec); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		if id, ok := rec["request_id"].(string); ok {
			return id
		}
	}
	t.Fatalf("no access log line with a request_id in %q", logs)
	return ""
}
