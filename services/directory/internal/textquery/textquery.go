// Package textquery is the management API's TextQueryMethod: how a query
// text is compared with a stored value, the same way on every database.
package textquery

import (
	"strings"

	"golang.org/x/text/cases"
)

// Method is a TextQueryMethod; the numbers are the API's.
type Method int32

// Methods.
const (
	Equals Method = iota
	EqualsIgnoreCase
	StartsWith
	StartsWithIgnoreCase
	Contains
	ContainsIgnoreCase
	EndsWith
	EndsWithIgnoreCase
)

// Valid reports whether m is a defined method.
func (m Method) Valid() bool { return m >= Equals && m <= EndsWithIgnoreCase }

// IgnoresCase reports whether m compares case-insensitively.
func (m Method) IgnoresCase() bool {
	return m == EqualsIgnoreCase || m == StartsWithIgnoreCase || m == ContainsIgnoreCase || m == EndsWithIgnoreCase
}

// Match reports whether stored matches text under m. Ignoring case uses
// full Unicode case folding, so "Straße" equals "STRASSE". Unknown methods
// match nothing.
func (m Method) Match(stored, text string) bool {
	if m.IgnoresCase() {
		fold := cases.Fold()
		stored, text = fold.String(stored), fold.String(text)
	}
	switch m {
	case Equals, EqualsIgnoreCase:
		return stored == text
	case StartsWith, StartsWithIgnoreCase:
		return strings.HasPrefix(stored, text)
	case Contains, ContainsIgnoreCase:
		return strings.Contains(stored, text)
	case EndsWith, EndsWithIgnoreCase:
		return strings.HasSuffix(stored, text)
	}
	return false
}
