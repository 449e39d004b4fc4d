package users

import (
	"strings"
	"unicode"

	"github.com/gatehouse-id/gatehouse/services/directory/internal/apierr"
)

// CheckUserName applies the user name rules, for every way a user is made
// (the management API, registration, an external identity): 1-200
// characters; no whitespace or control characters (a user name becomes
// part of login names); and nothing invisible: format characters (zero
// width space, joiners, soft hyphen, bidirectional marks) and the other
// default-ignorable code points would make two names that look alike, or
// one that looks like another's login name.
func CheckUserName(f *apierr.Fields, name string) {
	f.Check(apierr.Length("user_name", name, 1, 200))
	switch {
	case strings.IndexFunc(name, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) >= 0:
		f.Add("user_name", "must not contain whitespace")
	case strings.IndexFunc(name, invisible) >= 0:
		f.Add("user_name", "must not contain invisible characters (format or default-ignorable code points)")
	}
}

// invisible reports whether r is a format character (Unicode category Cf)
// or another default-ignorable code point (Unicode's
// Default_Ignorable_Code_Point property, DerivedCoreProperties.txt).
func invisible(r rune) bool {
	if unicode.Is(unicode.Cf, r) || unicode.Is(unicode.Variation_Selector, r) {
		return true
	}
	switch {
	case r == 0x034F, r == 0x115F, r == 0x1160, r == 0x17B4, r == 0x17B5, r == 0x3164, r == 0xFFA0:
		return true
	case r >= 0x180B && r <= 0x180F, r >= 0x2060 && r <= 0x206F, r >= 0xFFF0 && r <= 0xFFF8,
		r >= 0xE0000 && r <= 0xE0FFF:
		return true
	}
	return false
}
