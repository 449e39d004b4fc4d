package logging

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
)

// Every line written with a request's context carries its id, once.
func TestRequestIDOnEveryLine(t *testing.T) {
	var buf bytes.Buffer
	log := New(&buf, slog.LevelInfo)
	ctx := WithRequestID(context.Background(), "req-42")
	log.InfoContext(ctx, "one")
	log.WarnContext(ctx, "two", "request_id", "req-42")
	log.Info("three")
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 3 {
		t.Fatalf("%d lines", len(lines))
	}
	for i, want := range []string{"req-42", "req-42", ""} {
		var m map[string]any
		if err := json.Unmarshal([]byte(lines[i]), &m); err != nil {
			t.Fatal(err)
		}
		got, _ := m["request_id"].(string)
		if got != want || strings.Count(lines[i], "request_id") > 1 {
			t.Errorf("line %d: %s; want request_id %q once", i, lines[i], want)
		}
	}
}

func TestValidRequestID(t *testing.T) {
	for id, want := range map[string]bool{
		"abc-123_X.y": true, strings.Repeat("a", 128): true,
		"": false, strings.Repeat("a", 129): false, "a b": false, "a\nb": false, "ä": false, "a/b": false,
	} {
		if got := ValidRequestID(id); got != want {
			t.Errorf("ValidRequestID(%q) = %v; want %v", id, got, want)
		}
	}
}
