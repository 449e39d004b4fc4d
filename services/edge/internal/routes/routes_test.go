package routes

import (
	"slices"
	"strings"
	"testing"
)

func TestTableWellFormed(t *testing.T) {
	seen := map[string]bool{}
	valid := map[Service]bool{}
	for _, s := range Services() {
		valid[s] = true
	}
	for _, r := range Table() {
		if !strings.HasPrefix(r.Pattern, "/") {
			t.Errorf("pattern %q: does not start with /", r.Pattern)
		}
		if strings.Contains(strings.TrimSuffix(r.Pattern, "/*"), "*") {
			t.Errorf("pattern %q: * only allowed as a trailing /*", r.Pattern)
		}
		if seen[r.Method+" "+r.Pattern] {
			t.Errorf("pattern %q: duplicate", r.Pattern)
		}
		seen[r.Method+" "+r.Pattern] = true
		if !valid[r.Service] {
			t.Errorf("pattern %q: unknown service %q", r.Pattern, r.Service)
		}
		if r.Kind.String() == "unknown" {
			t.Errorf("pattern %q: kind not set", r.Pattern)
		}
		if !slices.Contains(Classes(), r.Class) {
			t.Errorf("pattern %q: rate-limit class %q unknown", r.Pattern, r.Class)
		}
	}
}

func TestTableNeverRoutesInternalServices(t *testing.T) {
	for _, r := range Table() {
		for _, internal := range []string{"DirectoryService", "TokenService", ".directory.v1.", ".tokens.v1."} {
			if strings.Contains(r.Pattern, internal) {
				t.Errorf("pattern %q exposes internal service %q", r.Pattern, internal)
			}
		}
		if strings.Contains(r.Pattern, "oauth-authorization-server") {
			t.Errorf("pattern %q: RFC 8414 metadata must not exist", r.Pattern)
		}
	}
}

func TestTableAssignments(t *testing.T) {
	want := map[string]struct {
		svc   Service
		cors  bool
		class Class
	}{
		"/.well-known/openid-configuration":  {Tokens, true, ClassMetadata},
		"/oauth/v2/token":                    {Tokens, true, ClassClient},
		"/oauth/v2/introspect":               {Tokens, true, ClassClient},
		"/oauth/v2/revoke":                   {Tokens, true, ClassClient},
		"/oauth/v2/device_authorization":     {Tokens, true, ClassClient},
		"/device":                            {Authn, false, ClassBrowser},
		"/oauth/v2/par":                      {Authn, true, ClassClient},
		"/device/*":                          {Authn, false, ClassBrowser},
		"/oauth/v2/keys":                     {Tokens, true, ClassMetadata},
		"/oidc/v1/userinfo":                  {Tokens, true, ClassAPI},
		"/admin/v1/*":                        {Tokens, false, ClassAPI},
		"/gatehouse.admin.v1.AdminService/*": {Tokens, false, ClassAPI},
		"/oauth/v2/authorize":                {Authn, false, ClassBrowser},
		"/oidc/v1/end_session":               {Authn, false, ClassBrowser},
		"/ui/login":                          {Authn, false, ClassBrowser},
		"/ui/login/*":                        {Authn, false, ClassBrowser},
		"/ui/account":                        {Authn, false, ClassBrowser},
		"/ui/account/*":                      {Authn, false, ClassBrowser},
		"/idps/callback":                     {Authn, false, ClassBrowser},
		"/management/v1/*":                   {Directory, false, ClassAPI},
		"/v2/users/*":                        {Directory, false, ClassAPI},
		"/gatehouse.management.v1.ManagementService/*": {Directory, false, ClassAPI},
		"/grpc.reflection.v1.ServerReflection/*":       {Directory, false, ClassAPI},
		"/grpc.reflection.v1alpha.ServerReflection/*":  {Directory, false, ClassAPI},
	}
	table := Table()
	if len(table) != len(want) {
		t.Errorf("table has %d routes; want %d", len(table), len(want))
	}
	for _, r := range table {
		w, ok := want[r.Pattern]
		if !ok {
			t.Errorf("unexpected route %q", r.Pattern)
			continue
		}
		if r.Service != w.svc || r.CORS() != w.cors || r.Class != w.class {
			t.Errorf("route %q: got service %s cors %v class %s; want %s cors %v class %s",
				r.Pattern, r.Service, r.CORS(), r.Class, w.svc, w.cors, w.class)
		}
	}
}

func TestTableIsACopy(t *testing.T) {
	a := Table()
	a[0].Service = "mutated"
	if Table()[0].Service == "mutated" {
		t.Fatal("Table shares its backing array between calls")
	}
}

func TestPrefix(t *testing.T) {
	cases := []struct {
		pattern string
		prefix  bool
		want    string
	}{
		{"/admin/v1/*", true, "/admin/v1/"},
		{"/ui/login", false, "/ui/login"},
	}
	for _, c := range cases {
		r := Route{Pattern: c.pattern}
		if r.IsPrefix() != c.prefix || r.Prefix() != c.want {
			t.Errorf("%q: got IsPrefix %v Prefix %q; want %v %q", c.pattern, r.IsPrefix(), r.Prefix(), c.prefix, c.want)
		}
	}
}
