package main

import (
	"io"
	"strings"
	"testing"
	"time"

	"github.com/gatehouse-id/gatehouse/bench/internal/floor"
	"github.com/gatehouse-id/gatehouse/bench/internal/load"
	"github.com/gatehouse-id/gatehouse/bench/internal/suite"
)

func TestParseFlags(t *testing.T) {
	c, err := parseFlags(nil, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if !c.embedded || !c.distributed || c.requests != 5000 || c.warmup != 500 || c.concurrency != 4 || c.timeout != 5*time.Minute {
		t.Fatalf("defaults: %+v", c)
	}
	c, err = parseFlags([]string{"-mode", "embedded", "-requests", "10"}, io.Discard)
	if err != nil || !c.embedded || c.distributed || c.requests != 10 {
		t.Fatalf("-mode embedded: %+v %v", c, err)
	}
	for _, bad := range [][]string{{"-mode", "both"}, {"-requests", "0"}, {"-concurrency", "0"}, {"-timeout", "0s"}, {"extra"}} {
		if _, err := parseFlags(bad, io.Discard); err == nil {
			t.Errorf("parseFlags(%q) succeeded; want an error", bad)
		}
	}
}

func row(name string, requests int, cpu time.Duration) suite.Row {
	return suite.Row{Scenario: name, Available: true, CPU: cpu, CPUKnown: true,
		Result: load.Result{Requests: requests, Elapsed: time.Second, Statuses: map[int]int{200: requests}}}
}

func TestTableTargetsAndRatio(t *testing.T) {
	b := &bench{cfg: config{requests: 100}, floor: []floor.Cost{{Name: "RS256 sign (RSA-2048 PKCS#1 v1.5)", PerOp: time.Millisecond}}}
	rows := []suite.Row{
		row("client_credentials JWT ES256", 100, 10*time.Millisecond),  // 0.1 ms ≤ 0.15
		row("client_credentials JWT RS256", 100, 120*time.Millisecond), // 1.2 ms > 1.05 ms
		{Scenario: "JWT introspection (RS256)", Note: "not available: POST /oauth/v2/introspect answered 404"},
	}
	var out strings.Builder
	if err := b.table("embedded", rows, 1).Write(&out); err != nil {
		t.Fatal(err)
	}
	got := out.String()
	for _, want := range []string{
		"≤ 0.150 ms met", "≤ 1.050 ms MISSED", "RS256 JWT server CPU / RS256 sign = 1.20",
		"JWT introspection (RS256): not available: POST /oauth/v2/introspect answered 404",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("table lacks %q:\n%s", want, got)
		}
	}
	var dist strings.Builder
	if err := b.table("distributed", rows, 4).Write(&dist); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(dist.String(), "target") && strings.Contains(dist.String(), "MISSED") {
		t.Errorf("distributed table shows embedded targets:\n%s", dist.String())
	}
}
