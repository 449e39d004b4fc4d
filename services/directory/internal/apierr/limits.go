package apierr

import (
	"errors"
	"sort"
	"strings"

	"buf.build/gen/go/bufbuild/protovalidate/protocolbuffers/go/buf/validate"
	"buf.build/go/protovalidate"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// Limits is protovalidate's verdict on a request: the field limits its
// proto declares ((buf.validate.field) options such as string.max_len and
// repeated.max_items), checked by buf.build/go/protovalidate. A handler
// reports each where and as it reported its own check before the limit
// moved into the proto, so clients get the same InvalidArgument, id and
// message; Rest reports whatever the handler did not ask about.
type Limits struct {
	desc   protoreflect.MessageDescriptor
	byPath map[string][]*protovalidate.Violation // "scopes", "scopes[2]"
	used   map[*protovalidate.Violation]bool
}

// CheckLimits validates msg against the rules of its proto. An error is a
// rule protovalidate cannot evaluate (a bug in a .proto): Internal.
func CheckLimits(msg proto.Message) (*Limits, error) {
	l := &Limits{desc: msg.ProtoReflect().Descriptor(), byPath: map[string][]*protovalidate.Violation{}, used: map[*protovalidate.Violation]bool{}}
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

// Max reports the uint32.lte rule on the request field at path (such as
// "query.limit"): "must be at most N".
func (l *Limits) Max(field, path string) *LengthError {
	if v := l.take(path, "uint32.lte"); v != nil {
		return &LengthError{Field: field, Msg: "must be at most " + itoa(int(v.RuleValue.Uint()))}
	}
	return nil
}

// Bytes reports the bytes.max_len rule on the request field at path:
// "must have at most N bytes".
func (l *Limits) Bytes(field, path string) *LengthError {
	if v := l.take(path, "bytes.max_len"); v != nil {
		return &LengthError{Field: field, Msg: "must have at most " + itoa(int(v.RuleValue.Uint())) + " bytes"}
	}
	return nil
}

// Between reports a repeated field of n elements at path (a field of the
// request itself) with fewer than min elements or more than its
// repeated.max_items rule allows: "must have min to N noun", N the rule's.
// The minimum is the handler's (a required list), the maximum the proto's.
func (l *Limits) Between(field, path string, n, min int, noun string) *LengthError {
	v := l.take(path, "repeated.max_items")
	if v == nil && n >= min {
		return nil
	}
	max := l.declaredMaxItems(path)
	if v != nil {
		max = v.RuleValue.Uint()
	}
	return &LengthError{Field: field, Msg: "must have " + itoa(min) + " to " + itoa(int(max)) + " " + noun}
}

// declaredMaxItems is the repeated.max_items rule the proto declares on
// the request's field name.
func (l *Limits) declaredMaxItems(name string) uint64 {
	fd := l.desc.Fields().ByName(protoreflect.Name(name))
	if fd == nil {
		return 0
	}
	rules, _ := proto.GetExtension(fd.Options(), validate.E_Field).(*validate.FieldRules)
	return rules.GetRepeated().GetMaxItems()
}

// ReportedIn marks as reported each violation at one of paths, or at an
// element of one ("redirect_uris[2]"), for which f already holds an error
// of that exact field: a domain check that also serves callers outside
// the API (and so keeps its own limit) has reported it in its own words.
// A violation f does not name stays for Rest.
func (l *Limits) ReportedIn(f Fields, paths ...string) {
	named := make(map[string]bool, len(f))
	for _, e := range f {
		named[e.Field] = true
	}
	for p, vs := range l.byPath {
		if !named[p] {
			continue
		}
		for _, root := range paths {
			if p == root || strings.HasPrefix(p, root+"[") {
				for _, v := range vs {
					l.used[v] = true
				}
			}
		}
	}
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
