package report

import (
	"strings"
	"testing"
)

func TestWriteAlignsColumns(t *testing.T) {
	var b strings.Builder
	err := Table{
		Title:  "embedded",
		Header: []string{"scenario", "req/s", "p50"},
		Rows:   [][]string{{"key set GET", "12345.6", "0.2 ms"}, {"client_credentials JWT ES256", "9.0", "12.345 ms"}},
		Notes:  []string{"note ≤ 1"},
	}.Write(&b)
	if err != nil {
		t.Fatal(err)
	}
	want := `embedded
  scenario                        req/s        p50
  ------------------------------------------------
  key set GET                   12345.6     0.2 ms
  client_credentials JWT ES256      9.0  12.345 ms
  note ≤ 1

`
	if got := b.String(); got != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
}
