package apierr

import (
	"errors"
	"sort"
	"strings"

	"buf.build/go/protovalidate"
	"google.golang.org/protobuf/proto"
)

// Limits is protovalidate's verdict on a request: the field limits its
// proto declares ((buf.validate.field) options such as string.max_len and
// repeated.max_items), checked by buf.build/go/protovalidate. A handler
// reports each where and as it reported its own check before the limit
// moved into the proto, so clients get the same InvalidArgument, id and
// message; Rest reports whatever the handler did not ask about.
type Limits struct {
	byPath map[string][]*protovalidate.Violation // "scopes", "scopes[2]"
	used   map[*protovalidate.Violation]bool
}

// CheckLimits validates msg against the rules of its proto. An error is a
// rule protovalidate cannot evaluate (a bug in a .proto): Internal.
func CheckLimits(msg proto.Message) (*Limits, error) {
	l := &Limits{byPath: map[string][]*protovalidate.Violation{}, used: map[*protovalidate.Violation]bool{}}
	err := protovalidate.Validate(msg)
	var ve *protovalidate.ValidationError
	switch {
	case err == nil:
		return l, nil
	case !errors.As(err, &ve):
		return nil, err
	}
	for _, v := range ve.Violations {
		p := protovalidate.FieldPathString(v.Proto.GetField())
		l.byPath[p] = append(l.byPath[p], v)
	}
	return l, nil
}

// take returns (and marks reported) the violation of rule at path.
func (l *Limits) take(path, rule string) *protovalidate.Violation {
	for _, v := range l.byPath[path] {
		if v.Proto.GetRuleId() == rule {
			l.used[v] = true
			return v
		}
	}
	return nil
}

// Length is Length(field, value, min, max) with max the string.max_len
// rule on the request field at path (for an element of a repeated field,
// "scopes[2]", its items rule): a blank value "is required" when min > 0,
// one beyond the rule "must have min to max characters".
func (l *Limits) Length(field, path, value string, min int) *LengthError {
	if min > 0 && strings.TrimSpace(value) == "" {
		return &LengthError{Field: field, Msg: "is required"}
	}
	v := l.take(path, "string.max_len")
	if v == nil && strings.HasSuffix(path, "]") {
		v = l.take(path, "repeated.items.string.max_len")
	}
	if v != nil {
		return &LengthError{Field: field, Msg: "must have " + itoa(min) + " to " + itoa(int(v.RuleValue.Uint())) + " characters"}
	}
	return nil
}

// Count reports the repeated.max_items rule on the request field at path:
// "must have at most N entries".
func (l *Limits) Count(field, path string) *LengthError {
	if v := l.take(path, "repeated.max_items"); v != nil {
		return &LengthError{Field: field, Msg: "must have at most " + itoa(int(v.RuleValue.Uint())) + " entries"}
	}
	return nil
}

// Rest adds to f every violation no Length or Count call reported, in
// protovalidate's words, so a limit added to a proto is enforced even
// before its handler reports it in its own words.
func (l *Limits) Rest(f *Fields) {
	paths := make([]string, 0, len(l.byPath))
	for p := range l.byPath {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, path := range paths {
		for _, v := range l.byPath[path] {
			if !l.used[v] {
				l.used[v] = true
				f.Add(path, v.Proto.GetMessage())
			}
		}
	}
}
