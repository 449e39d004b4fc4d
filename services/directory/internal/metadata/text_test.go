package metadata_test

import (
	"testing"

	"github.com/gatehouse-id/gatehouse/services/directory/internal/metadata"
)

func TestTextMethodMatch(t *testing.T) {
	cases := []struct {
		method       metadata.TextMethod
		stored, text string
		want         bool
	}{
		{metadata.TextEquals, "Color", "Color", true},
		{metadata.TextEquals, "Color", "color", false},
		{metadata.TextEquals, "Color", "Colo", false},
		{metadata.TextEqualsIgnoreCase, "Color", "cOLOR", true},
		{metadata.TextEqualsIgnoreCase, "Straße", "STRASSE", true},
		{metadata.TextEqualsIgnoreCase, "ÄRGER", "ärger", true},
		{metadata.TextEqualsIgnoreCase, "Color", "Colour", false},
		{metadata.TextStartsWith, "app.theme", "app.", true},
		{metadata.TextStartsWith, "app.theme", "App.", false},
		{metadata.TextStartsWith, "app", "app.theme", false},
		{metadata.TextStartsWithIgnoreCase, "App.Theme", "app.t", true},
		{metadata.TextContains, "app.theme", "p.th", true},
		{metadata.TextContains, "app.theme", "P.TH", false},
		{metadata.TextContainsIgnoreCase, "app.theme", "P.TH", true},
		{metadata.TextContains, "app.theme", "", true},
		{metadata.TextEndsWith, "app.theme", ".theme", true},
		{metadata.TextEndsWith, "app.theme", ".Theme", false},
		{metadata.TextEndsWith, "me", "theme", false},
		{metadata.TextEndsWithIgnoreCase, "app.THEME", ".theme", true},
		{metadata.TextMethod(8), "x", "x", false},
		{metadata.TextMethod(-1), "x", "x", false},
	}
	for _, tc := range cases {
		if got := tc.method.Match(tc.stored, tc.text); got != tc.want {
			t.Errorf("method %d: Match(%q, %q) = %v; want %v", tc.method, tc.stored, tc.text, got, tc.want)
		}
	}
	for m := metadata.TextMethod(-1); m <= 8; m++ {
		if want := m >= 0 && m <= 7; m.Valid() != want {
			t.Errorf("TextMethod(%d).Valid() = %v; want %v", m, m.Valid(), want)
		}
	}
}
