// Package output prints API responses as JSON (protojson, the management
// API's own field names), YAML (the same document) or a table of chosen
// columns.
package output

import (
	"encoding/json"
	"fmt"
	"io"
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
	raw, err := protojson.Marshal(m)
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
	v, err := Generic(m)
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
			_, err := fmt.Fprintln(w, cell(Lookup(v, path)))
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
// subset of kubectl's JSONPath that scripts need to pick an id).
func JSONPath(format string) (string, bool) {
	expr, ok := strings.CutPrefix(format, "jsonpath=")
	if !ok || !strings.HasPrefix(expr, "{.") || !strings.HasSuffix(expr, "}") {
		return "", false
	}
	return expr[2 : len(expr)-1], true
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
