package report

import (
	"fmt"
	"io"
	"strings"
	"unicode/utf8"
)

// Table is a titled table with notes printed under it.
type Table struct {
	Title  string
	Header []string
	Rows   [][]string
	Notes  []string
}

// Write prints t to w.
func (t Table) Write(w io.Writer) error {
	widths := make([]int, len(t.Header))
	for _, r := range append([][]string{t.Header}, t.Rows...) {
		for i, c := range r {
			if i < len(widths) {
				widths[i] = max(widths[i], utf8.RuneCountInString(c))
			}
		}
	}
	var b strings.Builder
	if t.Title != "" {
		b.WriteString(t.Title + "\n")
	}
	line := func(r []string) {
		var cells []string
		for i, w := range widths {
			c := ""
			if i < len(r) {
				c = r[i]
			}
			pad := strings.Repeat(" ", w-utf8.RuneCountInString(c))
			if i == 0 {
				cells = append(cells, c+pad)
			} else {
				cells = append(cells, pad+c)
			}
		}
		b.WriteString(strings.TrimRight("  "+strings.Join(cells, "  "), " ") + "\n")
	}
	line(t.Header)
	total := 0
	for _, w := range widths {
		total += w
	}
	b.WriteString("  " + strings.Repeat("-", total+2*(len(widths)-1)) + "\n")
	for _, r := range t.Rows {
		line(r)
	}
	for _, n := range t.Notes {
		b.WriteString("  " + n + "\n")
	}
	b.WriteString("\n")
	_, err := io.WriteString(w, b.String())
	if err != nil {
		return fmt.Errorf("write report: %w", err)
	}
	return nil
}
