package scope

import (
	"errors"
	"strings"
	"testing"

	"github.com/gatehouse-id/gatehouse/pkg/oauth"
)

// FuzzParse: any scope string parses into known, distinct scopes, or is
// refused with invalid_scope; parsing the result again gives it back.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"openid", "openid profile email", "openid  offline_access",
		"urn:gatehouse:iam:org:project:id:gatehouse:aud", "urn:gatehouse:iam:org:id:123", "urn:zitadel:iam:org:id:1", "a\x00b", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		got, err := Parse(raw)
		if err != nil {
			var oe *oauth.Error
			if !errors.As(err, &oe) || oe.Code != oauth.InvalidScope {
				t.Fatalf("Parse(%q) = %v; want invalid_scope", raw, err)
			}
			return
		}
		seen := map[string]bool{}
		for _, s := range got {
			if s == "" || strings.Contains(s, " ") || seen[s] || !valid(s) {
				t.Fatalf("Parse(%q) = %q: an empty, spaced, repeated or unknown scope", raw, got)
			}
			seen[s] = true
		}
		again, err := Parse(strings.Join(got, " "))
		if err != nil || strings.Join(again, " ") != strings.Join(got, " ") {
			t.Fatalf("Parse is not stable on %q: %q, %v", got, again, err)
		}
	})
}
