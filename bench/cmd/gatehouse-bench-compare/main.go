// Command gatehouse-bench-compare compares make bench's results files of
// two builds measured in turn (A B A B …, scripts/bench-compare.sh): for
// each scenario and mode, the median of each build's ratio to its floor
// (results.Record.RatioToFloor, which holds from one day to the next where
// absolute times do not), B over A, and the spread of each build's own
// runs, the noise band the change must clear; and B over A of the raw
// server CPU per request, since runs taken in turn meet the same machine
// while each run's floor brings noise of its own into its ratios.
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/gatehouse-id/gatehouse/bench/internal/results"
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("gatehouse-bench-compare", flag.ContinueOnError)
	fs.SetOutput(stderr)
	a := fs.String("a", "", "comma-separated results files of build A (the old one)")
	b := fs.String("b", "", "comma-separated results files of build B (the new one)")
	labelA := fs.String("label-a", "", "what build A is (default: the commits its files name, which are the tree the bench ran from)")
	labelB := fs.String("label-b", "", "what build B is")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *a == "" || *b == "" {
		fmt.Fprintln(stderr, "gatehouse-bench-compare: -a and -b are required")
		return 2
	}
	ra, err := load(strings.Split(*a, ","))
	if err == nil {
		var rb []results.Report
		if rb, err = load(strings.Split(*b, ",")); err == nil {
			err = compare(stdout, ra, rb, *labelA, *labelB)
		}
	}
	if err != nil {
		fmt.Fprintf(stderr, "gatehouse-bench-compare: %v\n", err)
		return 1
	}
	return 0
}

func load(paths []string) ([]results.Report, error) {
	var out []results.Report
	for _, p := range paths {
		raw, err := os.ReadFile(p)
		if err != nil {
			return nil, err
		}
		var r results.Report
		if err := json.Unmarshal(raw, &r); err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		r.SetRatios() // an older results file may lack them
		out = append(out, r)
	}
	if len(out) == 0 {
		return nil, errors.New("no results files")
	}
	return out, nil
}

type key struct{ scenario, mode string }

// Row is one scenario in one mode of the comparison.
type Row struct {
	Scenario, Mode   string
	A, B             []float64 // ratios to the floor, one per run
	CPUA, CPUB       []float64 // server CPU per request, µs
	MedA, MedB       float64
	Change           float64 // MedB/MedA
	SpreadA, SpreadB float64 // max/min - 1 of each build's runs
}

func rows(ra, rb []results.Report) []Row {
	m := map[key]*Row{}
	var order []key
	add := func(reps []results.Report, isB bool) {
		for _, r := range reps {
			for _, rec := range r.Results {
				if rec.RatioToFloor <= 0 || rec.Errors > 0 {
					continue
				}
				k := key{rec.Scenario, rec.Mode}
				row := m[k]
				if row == nil {
					row = &Row{Scenario: rec.Scenario, Mode: rec.Mode}
					m[k] = row
					order = append(order, k)
				}
				if isB {
					row.B, row.CPUB = append(row.B, rec.RatioToFloor), append(row.CPUB, rec.CPUUSPerReq)
				} else {
					row.A, row.CPUA = append(row.A, rec.RatioToFloor), append(row.CPUA, rec.CPUUSPerReq)
				}
			}
		}
	}
	add(ra, false)
	add(rb, true)
	var out []Row
	for _, k := range order {
		row := m[k]
		if len(row.A) == 0 || len(row.B) == 0 {
			continue
		}
		row.MedA, row.MedB = median(row.A), median(row.B)
		row.Change = row.MedB / row.MedA
		row.SpreadA, row.SpreadB = spread(row.A), spread(row.B)
		out = append(out, *row)
	}
	return out
}

func compare(w io.Writer, ra, rb []results.Report, labelA, labelB string) error {
	if labelA == "" {
		labelA = commits(ra)
	}
	if labelB == "" {
		labelB = commits(rb)
	}
	fmt.Fprintf(w, "A: %s (%d runs)   B: %s (%d runs)\n", labelA, len(ra), labelB, len(rb))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "scenario\tmode\tA ratio to floor\tB ratio to floor\tB/A\tA spread\tB spread\tA CPU µs/req\tB CPU µs/req\tCPU B/A\t")
	for _, r := range rows(ra, rb) {
		fmt.Fprintf(tw, "%s\t%s\t%.2f\t%.2f\t%.3f\t±%.0f%%\t±%.0f%%\t%.0f\t%.0f\t%.3f\t\n", r.Scenario, r.Mode, r.MedA, r.MedB, r.Change,
			50*r.SpreadA, 50*r.SpreadB, median(r.CPUA), median(r.CPUB), median(r.CPUB)/median(r.CPUA))
	}
	return tw.Flush()
}

func commits(reps []results.Report) string {
	var cs []string
	for _, r := range reps {
		c := r.Commit
		if len(c) > 7 {
			c = c[:7]
		}
		if r.Dirty {
			c += "+dirty"
		}
		if !slices.Contains(cs, c) {
			cs = append(cs, c)
		}
	}
	return strings.Join(cs, ",")
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// spread is how far apart a build's own runs are: max/min - 1 (0.10 for
// runs 10% apart, printed as ±5%).
func spread(v []float64) float64 {
	return slices.Max(v)/slices.Min(v) - 1
}
