// Package output prints API responses as JSON (protojson, the management
// API's own field names), YAML (the same document) or a table of chosen
// columns.
package output

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"sigs.k8s.io/yaml"
)

// Formats.
const (
	JSON  = "json"
	YAML  = "yaml"
	Table = "table"
)

// Column is one table column: a header and a dotted path into the JSON
// form of a row (e.g. "details.creationDate").
type Column struct {
	Header string
	Path   string
}

// View says how a response looks as a table: Rows is the path of the list
// ("" for a single object shown as one row), Columns its columns.
type View struct {
	Rows    string
	Columns []Column
}

// Cols builds columns from "HEADER=path" pairs.
func Cols(specs ...string) []Column {
	out := make([]Column, 0, len(specs))
	for _, s := range specs {
		h, p, _ := strings.Cut(s, "=")
		out = append(out, Column{Header: h, Path: p})
	}
	return out
}

// Generic turns a message into its JSON document as Go values.
func Generic(m proto.Message) (any, error) {
	return generic(m, protojson.MarshalOptions{})
}

func generic(m proto.Message, opts protojson.MarshalOptions) (any, error) {
	raw, err := opts.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("output: %w", err)
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil, fmt.Errorf("output: %w", err)
	}
	return v, nil
}

// Print writes m in format to w.
func Print(w io.Writer, format string, m proto.Message, view View) error {
	var opts protojson.MarshalOptions
	if _, ok := JSONPath(format); ok {
		// protojson leaves out zero values: with them, a path to a field
		// that is false, 0 or "" finds it, and only a path the response
		// does not have matches nothing.
		opts.EmitUnpopulated = true
	}
	v, err := generic(m, opts)
	if err != nil {
		return err
	}
	return PrintValue(w, format, v, view)
}

// PrintValue writes a JSON-shaped value in format to w.
func PrintValue(w io.Writer, format string, v any, view View) error {
	switch format {
	case JSON:
		raw, err := json.MarshalIndent(v, "", "  ")
		if err != nil {
			return fmt.Errorf("output: %w", err)
		}
		_, err = fmt.Fprintf(w, "%s\n", raw)
		return err
	case YAML:
		raw, err := yaml.Marshal(v)
		if err != nil {
			return fmt.Errorf("output: %w", err)
		}
		_, err = w.Write(raw)
		return err
	case Table:
		return table(w, v, view)
	default:
		if path, ok := JSONPath(format); ok {
			found, err := lookupStrict(v, path)
			if err != nil {
				return fmt.Errorf("-o %s: %w", format, err)
			}
			_, err = fmt.Fprintln(w, cell(found))
			return err
		}
		return fmt.Errorf("output: unknown format %q (table, json, yaml or jsonpath={.field})", format)
	}
}

func table(w io.Writer, v any, view View) error {
	var rows []any
	if view.Rows == "" {
		rows = []any{v}
	} else if list, ok := Lookup(v, view.Rows).([]any); ok {
		rows = list
	}
	cols := view.Columns
	if len(cols) == 0 {
		// No view: fall back to YAML, which is readable too.
		return PrintValue(w, YAML, v, view)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	hdr := make([]string, len(cols))
	for i, c := range cols {
		hdr[i] = c.Header
	}
	fmt.Fprintln(tw, strings.Join(hdr, "\t"))
	for _, r := range rows {
		cells := make([]string, len(cols))
		for i, c := range cols {
			cells[i] = cell(Lookup(r, c.Path))
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t"))
	}
	return tw.Flush()
}

// JSONPath parses the format jsonpath={.a.b} (a dotted path of keys, the
// subset of kubectl's JSONPath that scripts need to pick an id). A path
// the output does not have is an error, not an empty value.
func JSONPath(format string) (string, bool) {
	expr, ok := strings.CutPrefix(format, "jsonpath=")
	if !ok || !strings.HasPrefix(expr, "{.") || !strings.HasSuffix(expr, "}") {
		return "", false
	}
	return expr[2 : len(expr)-1], true
}

// lookupStrict follows a dotted path of object keys like Lookup, but a
// path that leads nowhere (a missing key, null, or into a list or a value)
// is an error, as kubectl's jsonpath with --allow-missing-template-keys=false:
// printing a placeholder would hand a script "-" for an id.
func lookupStrict(v any, path string) (any, error) {
	at := ""
	where := func() string {
		if at == "" {
			return "the output"
		}
		return at
	}
	var ks []string
	if path != "" { // {.} is the whole output
		ks = strings.Split(path, ".")
	}
	for _, k := range ks {
		switch x := v.(type) {
		case map[string]any:
			var ok bool
			if v, ok = x[k]; !ok {
				return nil, fmt.Errorf("matches nothing: no key %q in %s (it has %s)", k, where(), keys(x))
			}
		case nil:
			return nil, fmt.Errorf("matches nothing: %s is null", where())
		case []any:
			return nil, fmt.Errorf("matches nothing: %s is a list (the jsonpath subset has no [index])", where())
		default:
			return nil, fmt.Errorf("matches nothing: %s is a value, not an object", where())
		}
		at += "." + k
	}
	if v == nil {
		return nil, fmt.Errorf("matches nothing: %s is null", where())
	}
	return v, nil
}

func keys(m map[string]any) string {
	if len(m) == 0 {
		return "no keys"
	}
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return strings.Join(out, ", ")
}

// Lookup follows a dotted path of object keys.
func Lookup(v any, path string) any {
	if path == "" {
		return v
	}
	for _, k := range strings.Split(path, ".") {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[k]
	}
	return v
}

func cell(v any) string {
	switch x := v.(type) {
	case nil:
		return "-"
	case string:
		return strings.NewReplacer("\t", " ", "\n", " ").Replace(x)
	case []any:
		parts := make([]string, len(x))
		for i, e := range x {
			parts[i] = cell(e)
		}
		return strings.Join(parts, ",")
	case map[string]any:
		raw, _ := json.Marshal(x)
		return string(raw)
	default:
		return fmt.Sprint(x)
	}
}
