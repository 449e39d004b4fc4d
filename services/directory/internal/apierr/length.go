package apierr

import (
	"strings"
	"unicode/utf8"
)

// Length checks that value has min..max characters (runes), naming field in
// the error. min 1 makes the field required; whitespace-only is empty.
func Length(field, value string, min, max int) *LengthError {
	n := utf8.RuneCountInString(value)
	if min > 0 && strings.TrimSpace(value) == "" {
		return &LengthError{Field: field, Msg: "is required"}
	}
	if n < min || n > max {
		return &LengthError{Field: field, Msg: "must have " + itoa(min) + " to " + itoa(max) + " characters"}
	}
	return nil
}

// LengthError is a field outside its length rule.
type LengthError struct{ Field, Msg string }

func (e *LengthError) Error() string { return e.Field + " " + e.Msg }

func itoa(n int) string {
	if n == 0 {
		return "0"
	}
	var b [20]byte
	i := len(b)
	for n > 0 {
		i--
		b[i] = byte('0' + n%10)
		n /= 10
	}
	return string(b[i:])
}

// Fields collects field errors and returns one InvalidArgument naming all.
type Fields []*LengthError

// Check adds the result of a Length call.
func (f *Fields) Check(e *LengthError) {
	if e != nil {
		*f = append(*f, e)
	}
}

// Add records a field error with a custom message.
func (f *Fields) Add(field, msg string) { *f = append(*f, &LengthError{Field: field, Msg: msg}) }

// Err returns nil or an InvalidArgument listing every field problem.
func (f Fields) Err(id string) error {
	if len(f) == 0 {
		return nil
	}
	parts := make([]string, len(f))
	for i, e := range f {
		parts[i] = e.Error()
	}
	return InvalidArgument(id, "%s", strings.Join(parts, "; "))
}
