package metadata

import (
	"strings"

	"golang.org/x/text/cases"
)

// TextMethod says how a query text is compared with a stored key. The
// numbers are the management API's TextQueryMethod values.
type TextMethod int32

// Text methods.
const (
	TextEquals TextMethod = iota
	TextEqualsIgnoreCase
	TextStartsWith
	TextStartsWithIgnoreCase
	TextContains
	TextContainsIgnoreCase
	TextEndsWith
	TextEndsWithIgnoreCase
)

// Valid reports whether m is a known method.
func (m TextMethod) Valid() bool { return m >= TextEquals && m <= TextEndsWithIgnoreCase }

// Match reports whether stored matches text under m. Ignoring case uses
// full Unicode case folding, so "Straße" equals "STRASSE". Unknown methods
// match nothing.
func (m TextMethod) Match(stored, text string) bool {
	switch m {
	case TextEqualsIgnoreCase, TextStartsWithIgnoreCase, TextContainsIgnoreCase, TextEndsWithIgnoreCase:
		fold := cases.Fold()
		stored, text = fold.String(stored), fold.String(text)
	}
	switch m {
	case TextEquals, TextEqualsIgnoreCase:
		return stored == text
	case TextStartsWith, TextStartsWithIgnoreCase:
		return strings.HasPrefix(stored, text)
	case TextContains, TextContainsIgnoreCase:
		return strings.Contains(stored, text)
	case TextEndsWith, TextEndsWithIgnoreCase:
		return strings.HasSuffix(stored, text)
	}
	return false
}
