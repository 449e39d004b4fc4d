package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"google.golang.org/genproto/googleapis/api/annotations"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/gatehouse-id/gatehouse/pkg/config"
	adminv1 "github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/admin/v1"
	managementv1 "github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/management/v1"
)

// The committed OpenAPI documents (openapi/, written by `make proto`) and
// the public service each describes. The internal directory and tokens
// services have none.
var openAPIDocs = []struct {
	file, title string
	service     protoreflect.ServiceDescriptor
}{
	{"management.swagger.json", "Gatehouse management API", managementv1.File_gatehouse_management_v1_management_proto.Services().ByName("ManagementService")},
	{"admin.swagger.json", "Gatehouse admin API", adminv1.File_gatehouse_admin_v1_admin_proto.Services().ByName("AdminService")},
}

// swaggerDoc is the part of a Swagger 2.0 document the tests read.
type swaggerDoc struct {
	Swagger string `json:"swagger"`
	Info    struct {
		Title   string `json:"title"`
		Version string `json:"version"`
	} `json:"info"`
	Paths       map[string]map[string]swaggerOp `json:"paths"`
	Definitions map[string]*swaggerSchema       `json:"definitions"`
}

type swaggerOp struct {
	OperationID string         `json:"operationId"`
	Parameters  []swaggerParam `json:"parameters"`
	Responses   map[string]struct {
		Schema *swaggerSchema `json:"schema"`
	} `json:"responses"`
}

type swaggerParam struct {
	Name     string         `json:"name"`
	In       string         `json:"in"`
	Required bool           `json:"required"`
	Schema   *swaggerSchema `json:"schema"`
}

type swaggerSchema struct {
	Ref        string                    `json:"$ref"`
	Type       string                    `json:"type"`
	Properties map[string]*swaggerSchema `json:"properties"`
	Items      *swaggerSchema            `json:"items"`
	Enum       []string                  `json:"enum"`
}

func loadOpenAPIDoc(t *testing.T, file string) *swaggerDoc {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "openapi", file))
	if err != nil {
		t.Fatalf("the OpenAPI document (make proto writes it): %v", err)
	}
	var d swaggerDoc
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	return &d
}

// restRoute is one REST binding of an RPC: its google.api.http rule.
type restRoute struct {
	method   protoreflect.MethodDescriptor
	verb     string // lower case, as Swagger keys operations
	template string // as in the proto: /management/v1/users/{user_id}/password
	body     string
}

// restRoutes lists the REST routes of sd from its google.api.http options:
// the routes vanguard transcodes, so the ones Gatehouse serves.
func restRoutes(t *testing.T, sd protoreflect.ServiceDescriptor) []restRoute {
	t.Helper()
	var out []restRoute
	for i := 0; i < sd.Methods().Len(); i++ {
		md := sd.Methods().Get(i)
		rule, _ := proto.GetExtension(md.Options(), annotations.E_Http).(*annotations.HttpRule)
		if rule == nil || rule.GetPattern() == nil {
			t.Errorf("%s has no google.api.http rule: a public RPC needs a REST route", md.FullName())
			continue
		}
		for _, r := range append([]*annotations.HttpRule{rule}, rule.GetAdditionalBindings()...) {
			var verb, tmpl string
			switch p := r.GetPattern().(type) {
			case *annotations.HttpRule_Get:
				verb, tmpl = "get", p.Get
			case *annotations.HttpRule_Put:
				verb, tmpl = "put", p.Put
			case *annotations.HttpRule_Post:
				verb, tmpl = "post", p.Post
			case *annotations.HttpRule_Delete:
				verb, tmpl = "delete", p.Delete
			case *annotations.HttpRule_Patch:
				verb, tmpl = "patch", p.Patch
			case *annotations.HttpRule_Custom:
				verb, tmpl = strings.ToLower(p.Custom.GetKind()), p.Custom.GetPath()
			}
			out = append(out, restRoute{method: md, verb: verb, template: tmpl, body: r.GetBody()})
		}
	}
	return out
}

var pathVar = regexp.MustCompile(`\{([^}]*)\}`)

// docPath is the route's path as the document writes it: each variable by
// the JSON name of its field (user_id becomes userId); it also returns the
// request fields bound to the path.
func docPath(t *testing.T, r restRoute) (string, map[string]bool) {
	t.Helper()
	bound := map[string]bool{}
	p := pathVar.ReplaceAllStringFunc(r.template, func(v string) string {
		name := v[1 : len(v)-1]
		if strings.ContainsAny(name, "=.") {
			t.Fatalf("%s: path variable %s: only plain field names are supported here", r.method.FullName(), v)
		}
		fd := r.method.Input().Fields().ByName(protoreflect.Name(name))
		if fd == nil {
			t.Fatalf("%s: path variable %s is no field of %s", r.method.FullName(), v, r.method.Input().FullName())
		}
		bound[name] = true
		return "{" + fd.JSONName() + "}"
	})
	return p, bound
}

// TestOpenAPIDocumentsCoverTheRESTAPI: every REST route of the management
// and admin APIs (their RPCs' google.api.http rules, which vanguard serves)
// is in the committed OpenAPI document under its path and method, with
// nothing else there; request bodies, query parameters and responses name
// the fields as the REST API's JSON does (proto JSON names, camelCase), down
// through every nested message, and enums list their value names. A new or
// changed RPC without `make proto` fails here (and in make proto-check).
func TestOpenAPIDocumentsCoverTheRESTAPI(t *testing.T) {
	for _, api := range openAPIDocs {
		t.Run(api.file, func(t *testing.T) {
			doc := loadOpenAPIDoc(t, api.file)
			if doc.Swagger != "2.0" || doc.Info.Title != api.title || doc.Info.Version != "v1" {
				t.Errorf("swagger %q, info %+v; want 2.0, %q, v1", doc.Swagger, doc.Info, api.title)
			}
			routes := restRoutes(t, api.service)
			want := map[string]bool{}
			for _, r := range routes {
				path, bound := docPath(t, r)
				key := strings.ToUpper(r.verb) + " " + path
				want[key] = true
				op, ok := doc.Paths[path][r.verb]
				if !ok {
					t.Errorf("%s (%s) is not in %s", key, r.method.FullName(), api.file)
					continue
				}
				if id := string(api.service.Name()) + "_" + string(r.method.Name()); op.OperationID != id {
					t.Errorf("%s: operationId %q; want %q", key, op.OperationID, id)
				}
				checkOperation(t, doc, key, op, r, bound)
			}
			var extra []string
			for path, ops := range doc.Paths {
				for verb := range ops {
					if key := strings.ToUpper(verb) + " " + path; !want[key] {
						extra = append(extra, key)
					}
				}
			}
			sort.Strings(extra)
			if len(extra) > 0 {
				t.Errorf("%s documents operations no RPC serves: %v", api.file, extra)
			}
		})
	}
}

// checkOperation compares one documented operation with its RPC.
func checkOperation(t *testing.T, doc *swaggerDoc, key string, op swaggerOp, r restRoute, bound map[string]bool) {
	t.Helper()
	in := r.method.Input()
	var body *swaggerSchema
	var pathParams []string
	for _, p := range op.Parameters {
		switch p.In {
		case "path":
			pathParams = append(pathParams, p.Name)
			if !p.Required {
				t.Errorf("%s: path parameter %s is not required", key, p.Name)
			}
		case "body":
			body = p.Schema
		case "query":
			// Nested fields are flattened: query.limit.
			first := strings.Split(p.Name, ".")[0]
			if fd := in.Fields().ByJSONName(first); fd == nil || bound[string(fd.Name())] {
				t.Errorf("%s: query parameter %s is no unbound field of %s", key, p.Name, in.FullName())
			}
		}
	}
	var wantPath []string
	for name := range bound {
		wantPath = append(wantPath, in.Fields().ByName(protoreflect.Name(name)).JSONName())
	}
	slices.Sort(pathParams)
	slices.Sort(wantPath)
	if !slices.Equal(pathParams, wantPath) {
		t.Errorf("%s: path parameters %v; want %v", key, pathParams, wantPath)
	}
	seen := map[string]bool{}
	switch r.body {
	case "":
		if body != nil {
			t.Errorf("%s: a body parameter, but the rule maps no body", key)
		}
	case "*":
		if body == nil {
			t.Errorf("%s: no body parameter; the rule maps the request to the body", key)
		} else {
			checkSchema(t, doc, key+" body", body, in, bound, seen)
		}
	default:
		t.Errorf("%s: body %q: only \"*\" and none are checked here", key, r.body)
	}
	ok := op.Responses["200"].Schema
	if ok == nil {
		t.Errorf("%s: no 200 response schema", key)
	} else {
		checkSchema(t, doc, key+" response", ok, r.method.Output(), nil, seen)
	}
	if op.Responses["default"].Schema == nil || op.Responses["default"].Schema.Ref != "#/definitions/Status" {
		t.Errorf("%s: the default (error) response is not google.rpc.Status", key)
	}
}

// checkSchema compares a schema with message md: its properties are the
// JSON names of md's fields (less those in skip), recursively for message
// and enum fields. Well-known types are rendered as JSON primitives and not
// followed.
func checkSchema(t *testing.T, doc *swaggerDoc, where string, s *swaggerSchema, md protoreflect.MessageDescriptor, skip map[string]bool, seen map[string]bool) {
	t.Helper()
	s = resolve(t, doc, where, s)
	if s == nil {
		return
	}
	var got, want []string
	for name := range s.Properties {
		got = append(got, name)
	}
	for i := 0; i < md.Fields().Len(); i++ {
		if fd := md.Fields().Get(i); !skip[string(fd.Name())] {
			want = append(want, fd.JSONName())
		}
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("%s: %s has properties %v; the REST API's JSON has %v", where, md.FullName(), got, want)
		return
	}
	for i := 0; i < md.Fields().Len(); i++ {
		fd := md.Fields().Get(i)
		if skip[string(fd.Name())] || fd.IsMap() {
			continue
		}
		p := s.Properties[fd.JSONName()]
		if fd.IsList() {
			if p.Type != "array" || p.Items == nil {
				t.Errorf("%s: %s.%s is repeated but not an array", where, md.FullName(), fd.JSONName())
				continue
			}
			p = p.Items
		}
		switch fd.Kind() {
		case protoreflect.MessageKind:
			if strings.HasPrefix(string(fd.Message().FullName()), "google.protobuf.") {
				continue
			}
			if id := string(fd.Message().FullName()); !seen[id] {
				seen[id] = true
				checkSchema(t, doc, where+"."+fd.JSONName(), p, fd.Message(), nil, seen)
			}
		case protoreflect.EnumKind:
			e := resolve(t, doc, where+"."+fd.JSONName(), p)
			if e == nil {
				continue
			}
			var names []string
			for j := 0; j < fd.Enum().Values().Len(); j++ {
				names = append(names, string(fd.Enum().Values().Get(j).Name()))
			}
			if !slices.Equal(e.Enum, names) {
				t.Errorf("%s.%s: enum %v; want %v", where, fd.JSONName(), e.Enum, names)
			}
		}
	}
}

func resolve(t *testing.T, doc *swaggerDoc, where string, s *swaggerSchema) *swaggerSchema {
	t.Helper()
	if s.Ref == "" {
		return s
	}
	d := doc.Definitions[strings.TrimPrefix(s.Ref, "#/definitions/")]
	if d == nil {
		t.Errorf("%s: %s is not defined", where, s.Ref)
	}
	return d
}

// TestOpenAPIOperationsAreServed: a running Gatehouse serves every
// operation of the documents at the documented path and method. Without a
// token each answers the APIs' 401 (the route exists and reached the API's
// authorization); a path or method that is not served answers otherwise.
func TestOpenAPIOperationsAreServed(t *testing.T) {
	edge := startProc(t, config.RoleEdge, map[string]string{"GATEHOUSE_DATA_DIR": t.TempDir(), "GATEHOUSE_RATE_LIMIT_API": "0"})
	call := func(verb, path string, body bool) (int, string) {
		var hdr map[string]string
		var rd *strings.Reader
		if body {
			hdr, rd = map[string]string{"Content-Type": "application/json"}, strings.NewReader("{}")
		} else {
			rd = strings.NewReader("")
		}
		res, b := do(t, strings.ToUpper(verb), edge.base+path, rd, hdr)
		return res.StatusCode, b
	}
	unauthenticated := func(status int, body string) bool {
		return status == 401 && strings.Contains(body, `"code":16`)
	}
	// The probe tells a served route from one that is not.
	for _, c := range []struct{ verb, path string }{
		{"get", "/management/v1/nope"},
		{"patch", "/management/v1/orgs/me"},
		{"get", "/admin/v1/keys/nope"},
		{"delete", "/admin/v1/keys"},
	} {
		if status, body := call(c.verb, c.path, false); unauthenticated(status, body) {
			t.Fatalf("%s %s (not served) answers %d %s: the probe cannot tell served routes", c.verb, c.path, status, body)
		}
	}
	n := 0
	for _, api := range openAPIDocs {
		doc := loadOpenAPIDoc(t, api.file)
		for path, ops := range doc.Paths {
			concrete := pathVar.ReplaceAllString(path, "1")
			for verb, op := range ops {
				n++
				hasBody := slices.ContainsFunc(op.Parameters, func(p swaggerParam) bool { return p.In == "body" })
				if status, body := call(verb, concrete, hasBody); !unauthenticated(status, body) {
					t.Errorf("%s %s (%s, documented as %s): %d %s; want 401 from the API", strings.ToUpper(verb), concrete, op.OperationID, path, status, body)
				}
			}
		}
	}
	if n < 60 {
		t.Errorf("probed %d documented operations; the documents hold more", n)
	}
}
