package results

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestWriteCreatesTheDirectoryAndReplacesTheFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "bench", "results", "latest.json")
	for _, commit := range []string{"first", "second"} {
		if err := (Report{Commit: commit, Results: []Record{{Scenario: "keys", Mode: "embedded"}}}).Write(path); err != nil {
			t.Fatal(err)
		}
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var back Report
	if err := json.Unmarshal(raw, &back); err != nil || back.Commit != "second" || len(back.Results) != 1 {
		t.Fatalf("read back %+v, %v:\n%s", back, err, raw)
	}
	if !strings.HasSuffix(string(raw), "}\n") || !strings.Contains(string(raw), "\n  \"commit\": \"second\"") {
		t.Errorf("want indented JSON ending with a newline:\n%s", raw)
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o644 {
		t.Errorf("mode %v; want 0644", st.Mode())
	}
	entries, _ := os.ReadDir(filepath.Dir(path))
	if len(entries) != 1 {
		t.Errorf("directory holds %d files; want only latest.json (no temporary left)", len(entries))
	}
}

func TestWriteFailsWhereItCannot(t *testing.T) {
	blocker := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(blocker, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := (Report{}).Write(filepath.Join(blocker, "latest.json")); err == nil {
		t.Fatal("Write under a regular file succeeded; want an error")
	}
}

func TestMissing(t *testing.T) {
	r := Report{Results: []Record{{Scenario: "keys", Mode: "embedded"}, {Scenario: "login", Mode: "embedded"}, {Scenario: "keys", Mode: "distributed"}}}
	got := r.Missing([]string{"keys", "login"}, []string{"embedded", "distributed"})
	if !slices.Equal(got, []string{"login (distributed)"}) {
		t.Fatalf("Missing = %q; want login (distributed)", got)
	}
}

func TestUnits(t *testing.T) {
	if got := US(123456 * time.Nanosecond); got != 123.5 {
		t.Errorf("US = %v; want 123.5", got)
	}
	if got := MS(1234567 * time.Nanosecond); got != 1.235 {
		t.Errorf("MS = %v; want 1.235", got)
	}
	if got := MB(50 << 20); got != 50 {
		t.Errorf("MB = %v; want 50", got)
	}
	if got := Round(1234.56); got != 1234.6 {
		t.Errorf("Round = %v; want 1234.6", got)
	}
}

// Each record compares with its floor: the signature in the library it
// signs with, the argon2id check, or a bare server (embedded) or proxy
// (distributed).
func TestSetRatios(t *testing.T) {
	r := Report{
		Floor: []Floor{{Operation: "RS256 sign", Library: "openssl", USPerOp: 500}, {Operation: "RS256 sign", Library: "go", USPerOp: 1500},
			{Operation: "HTTP server", Library: "go", USPerOp: 20}, {Operation: "reverse proxy", Library: "go", USPerOp: 100},
			{Operation: "argon2id verify", Library: "go", USPerOp: 30000}},
		Results: []Record{
			{Scenario: "token-rs256", Mode: "embedded", CPUUSPerReq: 750, SigningLibrary: &Library{Library: "openssl"}},
			{Scenario: "keys", Mode: "embedded", CPUUSPerReq: 50},
			{Scenario: "keys", Mode: "distributed", CPUUSPerReq: 250},
			{Scenario: "login", Mode: "embedded", CPUUSPerReq: 33000},
			{Scenario: "token-es256", Mode: "embedded", CPUUSPerReq: 100}, // no ES256 floor measured
		},
	}
	r.SetRatios()
	want := []struct {
		op    string
		ratio float64
	}{{"RS256 sign (openssl)", 1.5}, {"HTTP server (go)", 2.5}, {"reverse proxy (go)", 2.5}, {"argon2id verify (go)", 1.1}, {"", 0}}
	for i, w := range want {
		if got := r.Results[i]; got.FloorOperation != w.op || got.RatioToFloor != w.ratio {
			t.Errorf("%s (%s): %q %v; want %q %v", got.Scenario, got.Mode, got.FloorOperation, got.RatioToFloor, w.op, w.ratio)
		}
	}
}
