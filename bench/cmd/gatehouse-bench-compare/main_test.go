package main

import (
	"bytes"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gatehouse-id/gatehouse/bench/internal/results"
)

func report(commit string, ratios map[string]float64) results.Report {
	r := results.Report{Commit: commit}
	for s, v := range ratios {
		r.Results = append(r.Results, results.Record{Scenario: s, Mode: "embedded", CPUUSPerReq: v * 10, RatioToFloor: v})
	}
	return r
}

// The medians of each build, their ratio and each build's spread; a
// scenario measured in one build only, or with errors, is left out.
func TestCompare(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, r results.Report) string {
		p := filepath.Join(dir, name)
		if err := r.Write(p); err != nil {
			t.Fatal(err)
		}
		return p
	}
	a1 := write("a1.json", report("aaaaaaaaa", map[string]float64{"keys": 2.0, "login": 1.2}))
	a2 := write("a2.json", report("aaaaaaaaa", map[string]float64{"keys": 2.2, "login": 1.2}))
	bad := report("bbbbbbbbb", map[string]float64{"keys": 1.9})
	bad.Results = append(bad.Results, results.Record{Scenario: "only-b", Mode: "embedded", RatioToFloor: 3})
	b1 := write("b1.json", bad)
	b2 := write("b2.json", report("bbbbbbbbb", map[string]float64{"keys": 2.1}))

	ra, err := load([]string{a1, a2})
	if err != nil {
		t.Fatal(err)
	}
	rb, err := load([]string{b1, b2})
	if err != nil {
		t.Fatal(err)
	}
	got := rows(ra, rb)
	if len(got) != 1 || got[0].Scenario != "keys" {
		t.Fatalf("rows %+v; want keys only", got)
	}
	r := got[0]
	if r.MedA != 2.1 || r.MedB != 2.0 || math.Abs(r.Change-2.0/2.1) > 1e-9 || math.Abs(r.SpreadA-0.1) > 1e-9 {
		t.Fatalf("row %+v", r)
	}
	var out bytes.Buffer
	if code := run([]string{"-a", a1 + "," + a2, "-b", b1 + "," + b2}, &out, &out); code != 0 {
		t.Fatalf("exit %d: %s", code, out.String())
	}
	if !strings.Contains(out.String(), "A: aaaaaaa (2 runs)") || !strings.Contains(out.String(), "0.952") {
		t.Fatalf("output:\n%s", out.String())
	}
}
