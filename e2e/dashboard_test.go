package e2e

import (
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestDashboardMetricsExist: every series the Grafana dashboard in
// deploy/monitoring queries is one Gatehouse defines (or Go's runtime and
// process collectors), so a renamed metric cannot leave a panel empty.
func TestDashboardMetricsExist(t *testing.T) {
	raw, err := os.ReadFile("../deploy/monitoring/grafana-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatalf("dashboard JSON: %v", err)
	}
	// Names the code registers, as dotted OpenTelemetry names.
	defined := map[string]bool{}
	literal := regexp.MustCompile(`"((?:gatehouse|http\.server)\.[a-z_.]+)"`)
	for _, root := range []string{"../pkg", "../services"} {
		err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
				return err
			}
			src, err := os.ReadFile(p)
			for _, m := range literal.FindAllSubmatch(src, -1) {
				defined[strings.ReplaceAll(string(m[1]), ".", "_")] = true
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	series := regexp.MustCompile(`\b((?:gatehouse|http_server|go|process)_[a-z_]+)\b`)
	suffix := regexp.MustCompile(`(_seconds)?(_total|_count|_bucket|_sum)?$`)
	n := 0
	for _, p := range dash.Panels {
		for _, tg := range p.Targets {
			for _, m := range series.FindAllString(tg.Expr, -1) {
				if strings.HasPrefix(m, "go_") || strings.HasPrefix(m, "process_") {
					continue
				}
				n++
				if base := suffix.ReplaceAllString(m, ""); !defined[base] {
					t.Errorf("panel %q queries %s, which no code defines", p.Title, m)
				}
			}
		}
	}
	if n < 10 {
		t.Fatalf("only %d Gatehouse series in the dashboard", n)
	}
}
