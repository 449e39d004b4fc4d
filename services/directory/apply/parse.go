// Package apply is Gatehouse's declarative provisioning: YAML documents
// describe organizations, projects, applications, users, identity
// providers, metadata and memberships by their natural keys; Plan reads
// the current state through the management API and says what to create,
// update or leave alone; Apply makes only that difference. The fields of
// each document are the management API's JSON names of the resource's
// create request, so the API reference is the schema. The gatehouse CLI
// (apply, export) and the directory's GATEHOUSE_BOOTSTRAP_FILE use it.
package apply

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"go.yaml.in/yaml/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// Doc is one YAML document: a resource by its natural key.
type Doc struct {
	File  string // the file it came from
	Index int    // 1-based position in the file
	Line  int    // line of the document's start

	Kind     string
	Org      string // the organization's name ("" for kind Org)
	Project  string // OIDCApp, APIApp: the project's name
	UserName string // UserMetadata, OrgMember: the user's name
	// Fields are the API fields (JSON names), with ${ENV} expanded.
	Fields map[string]any
}

// Name is the natural key for messages: acme/Shop/web.
func (d *Doc) Name() string {
	parts := []string{}
	if d.Org != "" {
		parts = append(parts, d.Org)
	}
	switch d.Kind {
	case KindOIDCApp, KindAPIApp:
		parts = append(parts, d.Project, str(d.Fields["name"]))
	case KindHumanUser, KindMachineUser:
		parts = append(parts, str(d.Fields["userName"]))
	case KindUserMetadata:
		parts = append(parts, d.UserName, str(d.Fields["key"]))
	case KindOrgMember:
		parts = append(parts, d.UserName)
	default:
		parts = append(parts, str(d.Fields["name"]))
	}
	return strings.Join(parts, "/")
}

// Where names the document in errors: file, position, kind and key.
func (d *Doc) Where() string {
	return fmt.Sprintf("%s: document %d (line %d, %s %s)", d.File, d.Index, d.Line, d.Kind, d.Name())
}

// Error is a problem with a document; it names the file, the document
// and, when there is one, the field.
type Error struct {
	Doc   *Doc
	File  string
	Index int
	Line  int
	Field string
	Msg   string
}

func (e *Error) Error() string {
	var where string
	if e.Doc != nil {
		where = e.Doc.Where()
	} else {
		where = fmt.Sprintf("%s: document %d (line %d)", e.File, e.Index, e.Line)
	}
	if e.Field != "" {
		return fmt.Sprintf("%s: field %s: %s", where, e.Field, e.Msg)
	}
	return where + ": " + e.Msg
}

// Kinds.
const (
	KindOrg          = "Org"
	KindProject      = "Project"
	KindOIDCApp      = "OIDCApp"
	KindAPIApp       = "APIApp"
	KindHumanUser    = "HumanUser"
	KindMachineUser  = "MachineUser"
	KindOIDCIdP      = "OIDCIdP"
	KindUserMetadata = "UserMetadata"
	KindOrgMember    = "OrgMember"
)

// Kinds lists every kind in the order they are applied.
var Kinds = []string{KindOrg, KindProject, KindOIDCIdP, KindHumanUser, KindMachineUser, KindOIDCApp, KindAPIApp, KindUserMetadata, KindOrgMember}

// meta are the keys of a kind that are not fields of its create request.
var meta = map[string][]string{
	KindOrg:          {},
	KindProject:      {"org"},
	KindOIDCApp:      {"org", "project"},
	KindAPIApp:       {"org", "project"},
	KindHumanUser:    {"org"},
	KindMachineUser:  {"org"},
	KindOIDCIdP:      {"org"},
	KindUserMetadata: {"org", "userName"},
	KindOrgMember:    {"org", "userName"},
}

// keyFields are the request fields of the natural key, and those the API
// requires that it never returns (required in every document).
var keyFields = map[string][]string{
	KindOrg:          {"name"},
	KindProject:      {"name"},
	KindOIDCApp:      {"name"},
	KindAPIApp:       {"name"},
	KindHumanUser:    {"userName"},
	KindMachineUser:  {"userName"},
	KindOIDCIdP:      {"name", "clientSecret"},
	KindUserMetadata: {"key"},
	KindOrgMember:    {"roles"},
}

// idFields are request fields the engine fills (ids); documents use the
// natural keys instead.
var idFields = map[string][]string{
	KindOIDCApp:      {"projectId"},
	KindAPIApp:       {"projectId"},
	KindUserMetadata: {"id"},
	KindOrgMember:    {"userId"},
}

// envRef is ${NAME}, or $${NAME}, the escape for a literal ${NAME}
// (Export writes every ${ of the data it reads so: a value an organization
// admin typed is never a reference when the file is applied).
var envRef = regexp.MustCompile(`\$(\$)?\{([A-Za-z_][A-Za-z0-9_]*)\}`)

// reservedEnv reports whether a document may not read the variable: the
// servers' own configuration (GATEHOUSE_*: the master key, the internal
// token, the database URL, the admin password) is never data, whatever
// file names it; only the identity provider secrets Export names are.
func reservedEnv(name string) bool {
	return strings.HasPrefix(name, "GATEHOUSE_") && !strings.HasPrefix(name, secretEnvPrefix)
}

// ParsePath reads a file, or every *.yaml and *.yml file of a directory
// (in name order).
func ParsePath(path string, env func(string) (string, bool)) ([]*Doc, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	files := []string{path}
	if st.IsDir() {
		files = nil
		entries, err := os.ReadDir(path)
		if err != nil {
			return nil, err
		}
		for _, e := range entries {
			if n := e.Name(); !e.IsDir() && (strings.HasSuffix(n, ".yaml") || strings.HasSuffix(n, ".yml")) {
				files = append(files, filepath.Join(path, n))
			}
		}
		sort.Strings(files)
		if len(files) == 0 {
			return nil, fmt.Errorf("%s: no .yaml or .yml files", path)
		}
	}
	var docs []*Doc
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		d, err := Parse(f, raw, env)
		if err != nil {
			return nil, err
		}
		docs = append(docs, d...)
	}
	return docs, nil
}

// Parse reads the YAML documents of one file. ${NAME} in a string value
// is replaced by the environment variable NAME (expanded after parsing,
// so a value can never change the document's structure); an unset one is
// an error.
func Parse(file string, data []byte, env func(string) (string, bool)) ([]*Doc, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var docs []*Doc
	for i := 1; ; i++ {
		var node yaml.Node
		err := dec.Decode(&node)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, &Error{File: file, Index: i, Msg: "not valid YAML: " + err.Error()}
		}
		if len(node.Content) == 0 {
			continue // an empty document (e.g. a trailing ---)
		}
		line := node.Content[0].Line
		var v any
		if err := node.Decode(&v); err != nil {
			return nil, &Error{File: file, Index: i, Line: line, Msg: "not valid YAML: " + err.Error()}
		}
		if v == nil {
			continue // only comments
		}
		m, ok := v.(map[string]any)
		if !ok {
			return nil, &Error{File: file, Index: i, Line: line, Msg: "a document must be a mapping with kind and the resource's fields"}
		}
		d, err := newDoc(file, i, line, m, env)
		if err != nil {
			return nil, err
		}
		docs = append(docs, d)
	}
	return docs, nil
}

func newDoc(file string, index, line int, m map[string]any, env func(string) (string, bool)) (*Doc, error) {
	d := &Doc{File: file, Index: index, Line: line}
	fail := func(field, format string, args ...any) error {
		return &Error{File: file, Index: index, Line: line, Field: field, Msg: fmt.Sprintf(format, args...)}
	}
	kind, _ := m["kind"].(string)
	if _, ok := meta[kind]; !ok {
		if kind == "" {
			return nil, fail("kind", "missing; one of %s", strings.Join(Kinds, ", "))
		}
		return nil, fail("kind", "unknown kind %q; one of %s", kind, strings.Join(Kinds, ", "))
	}
	d.Kind = kind
	delete(m, "kind")
	expanded, err := expand(m, env, "")
	if err != nil {
		return nil, fail(err.(*fieldErr).field, "%s", err.(*fieldErr).msg)
	}
	m = expanded.(map[string]any)
	for _, k := range meta[kind] {
		s, ok := m[k].(string)
		if !ok || s == "" {
			return nil, fail(k, "required (a name)")
		}
		switch k {
		case "org":
			d.Org = s
		case "project":
			d.Project = s
		case "userName":
			d.UserName = s
		}
		delete(m, k)
	}
	if kind == KindOrg {
		if _, ok := m["org"]; ok {
			return nil, fail("org", "not a field of kind Org (its name is name)")
		}
	}
	for _, k := range idFields[kind] {
		if _, ok := m[k]; ok {
			return nil, fail(k, "set by apply from the natural key; leave it out")
		}
	}
	d.Fields = m
	// The fields must be the create request's: unknown fields and wrong
	// values are found here, before anything is read or changed.
	if _, err := d.request(); err != nil {
		return nil, err
	}
	for _, k := range keyFields[kind] {
		if isZero(m[k]) {
			return nil, &Error{Doc: d, Field: k, Msg: "required"}
		}
	}
	return d, nil
}

type fieldErr struct{ field, msg string }

func (e *fieldErr) Error() string { return e.field + ": " + e.msg }

func expand(v any, env func(string) (string, bool), path string) (any, error) {
	switch x := v.(type) {
	case string:
		var refused error
		out := envRef.ReplaceAllStringFunc(x, func(ref string) string {
			m := envRef.FindStringSubmatch(ref)
			name := m[2]
			if m[1] != "" {
				return ref[1:] // $${NAME}: the literal ${NAME}
			}
			if refused != nil {
				return ""
			}
			if reservedEnv(name) {
				refused = &fieldErr{path, fmt.Sprintf("${%s} is Gatehouse's own configuration, which a document may not read (only %s* variables)", name, secretEnvPrefix)}
				return ""
			}
			val, ok := env(name)
			if !ok {
				refused = &fieldErr{path, fmt.Sprintf("environment variable %s is not set", name)}
			}
			return val
		})
		if refused != nil {
			return nil, refused
		}
		return out, nil
	case map[string]any:
		for k, e := range x {
			p := k
			if path != "" {
				p = path + "." + k
			}
			ev, err := expand(e, env, p)
			if err != nil {
				return nil, err
			}
			x[k] = ev
		}
		return x, nil
	case []any:
		for i, e := range x {
			ev, err := expand(e, env, fmt.Sprintf("%s[%d]", path, i))
			if err != nil {
				return nil, err
			}
			x[i] = ev
		}
		return x, nil
	}
	return v, nil
}

// request returns the document as its kind's create request, or an Error
// naming the field that does not fit.
func (d *Doc) request() (proto.Message, error) {
	req := newRequest(d.Kind)
	md := req.ProtoReflect().Descriptor()
	for k := range d.Fields {
		if md.Fields().ByJSONName(k) == nil {
			return nil, &Error{Doc: d, Field: k, Msg: fmt.Sprintf("unknown field for kind %s (fields: %s)", d.Kind, strings.Join(fieldNames(md, d.Kind), ", "))}
		}
	}
	for k, v := range d.Fields {
		raw, err := json.Marshal(map[string]any{k: v})
		if err != nil {
			return nil, &Error{Doc: d, Field: k, Msg: err.Error()}
		}
		one := newRequest(d.Kind)
		if err := protojson.Unmarshal(raw, one); err != nil {
			return nil, &Error{Doc: d, Field: k, Msg: cleanProtoErr(err)}
		}
		proto.Merge(req, one)
	}
	return req, nil
}

func fieldNames(md protoreflect.MessageDescriptor, kind string) []string {
	var out []string
	for i := 0; i < md.Fields().Len(); i++ {
		n := md.Fields().Get(i).JSONName()
		skip := false
		for _, id := range idFields[kind] {
			skip = skip || id == n
		}
		if !skip {
			out = append(out, n)
		}
	}
	return append(out, meta[kind]...)
}

// cleanProtoErr drops protojson's position prefix, which points into the
// JSON made from the YAML, not into the file.
func cleanProtoErr(err error) string {
	s := err.Error()
	if i := strings.Index(s, "): "); i >= 0 && strings.HasPrefix(s, "proto:") {
		s = s[i+3:]
	}
	return strings.TrimPrefix(s, "proto: ")
}

func isZero(v any) bool {
	switch x := v.(type) {
	case nil:
		return true
	case string:
		return x == ""
	case []any:
		return len(x) == 0
	}
	return false
}

func str(v any) string {
	s, _ := v.(string)
	return s
}
