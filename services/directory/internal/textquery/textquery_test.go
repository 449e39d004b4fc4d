package textquery_test

import (
	"testing"

	"github.com/gatehouse-id/gatehouse/services/directory/internal/textquery"
)

func TestTextMethodMatch(t *testing.T) {
	cases := []struct {
		method       textquery.Method
		stored, text string
		want         bool
	}{
		{textquery.Equals, "Color", "Color", true},
		{textquery.Equals, "Color", "color", false},
		{textquery.Equals, "Color", "Colo", false},
		{textquery.EqualsIgnoreCase, "Color", "cOLOR", true},
		{textquery.EqualsIgnoreCase, "Straße", "STRASSE", true},
		{textquery.EqualsIgnoreCase, "ÄRGER", "ärger", true},
		{textquery.EqualsIgnoreCase, "Color", "Colour", false},
		{textquery.StartsWith, "app.theme", "app.", true},
		{textquery.StartsWith, "app.theme", "App.", false},
		{textquery.StartsWith, "app", "app.theme", false},
		{textquery.StartsWithIgnoreCase, "App.Theme", "app.t", true},
		{textquery.Contains, "app.theme", "p.th", true},
		{textquery.Contains, "app.theme", "P.TH", false},
		{textquery.ContainsIgnoreCase, "app.theme", "P.TH", true},
		{textquery.Contains, "app.theme", "", true},
		{textquery.EndsWith, "app.theme", ".theme", true},
		{textquery.EndsWith, "app.theme", ".Theme", false},
		{textquery.EndsWith, "me", "theme", false},
		{textquery.EndsWithIgnoreCase, "app.THEME", ".theme", true},
		{textquery.Method(8), "x", "x", false},
		{textquery.Method(-1), "x", "x", false},
	}
	for _, tc := range cases {
		if got := tc.method.Match(tc.stored, tc.text); got != tc.want {
			t.Errorf("method %d: Match(%q, %q) = %v; want %v", tc.method, tc.stored, tc.text, got, tc.want)
		}
	}
	for m := textquery.Method(-1); m <= 8; m++ {
		if want := m >= 0 && m <= 7; m.Valid() != want {
			t.Errorf("textquery.Method(%d).Valid() = %v; want %v", m, m.Valid(), want)
		}
	}
}
