package apply

import (
	"errors"
	"strings"
	"testing"
)

func env(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

func TestParse(t *testing.T) {
	src := `kind: Org
name: acme
---
kind: OIDCApp
org: acme
project: Shop
name: web
redirectUris: ["https://shop.example.com/cb"]
grantTypes: [OIDC_GRANT_TYPE_AUTHORIZATION_CODE]
---
# an empty document is skipped
---
kind: OIDCIdP
org: acme
name: Upstream
issuer: https://up.example.com
clientId: gatehouse
clientSecret: "${UPSTREAM_SECRET}"
`
	docs, err := Parse("acme.yaml", []byte(src), env(map[string]string{"UPSTREAM_SECRET": `s3cret" with: yaml`}))
	if err != nil {
		t.Fatal(err)
	}
	if len(docs) != 3 {
		t.Fatalf("%d documents; want 3", len(docs))
	}
	if d := docs[1]; d.Kind != KindOIDCApp || d.Org != "acme" || d.Project != "Shop" || d.Name() != "acme/Shop/web" || d.Fields["project"] != nil {
		t.Fatalf("OIDCApp document: %+v", d)
	}
	// The expanded value is data, never YAML: it cannot change the document.
	if got := docs[2].Fields["clientSecret"]; got != `s3cret" with: yaml` {
		t.Fatalf("expanded secret: %q", got)
	}
	if docs[2].Index != 4 || docs[2].Line != 13 {
		t.Fatalf("position of the third document: index %d line %d; want 4, 13", docs[2].Index, docs[2].Line)
	}
}

func TestParseErrorsNameFileDocumentAndField(t *testing.T) {
	cases := []struct {
		name, src string
		want      []string
	}{
		{"bad yaml", "kind: Org\nname: [acme\n", []string{"x.yaml: document 1", "not valid YAML"}},
		{"not a mapping", "- a\n- b\n", []string{"x.yaml: document 1", "mapping"}},
		{"no kind", "name: acme\n", []string{"document 1", "field kind", "missing"}},
		{"unknown kind", "kind: Org\nname: a\n---\nkind: Realm\nname: b\n", []string{"document 2", "field kind", `unknown kind "Realm"`}},
		{"unknown field", "kind: Project\norg: acme\nname: Shop\ncolour: red\n", []string{"document 1", "Project acme/Shop", "field colour", "unknown field"}},
		{"snake case is not the JSON name", "kind: OIDCApp\norg: a\nproject: p\nname: web\nredirect_uris: [x]\n", []string{"field redirect_uris", "unknown field"}},
		{"bad enum", "kind: OIDCApp\norg: a\nproject: p\nname: web\nappType: DESKTOP\n", []string{"OIDCApp a/p/web", "field appType", "DESKTOP"}},
		{"wrong type", "kind: Project\norg: a\nname: p\nprojectRoleCheck: maybe\n", []string{"field projectRoleCheck"}},
		{"missing org", "kind: Project\nname: Shop\n", []string{"field org", "required"}},
		{"org on Org", "kind: Org\nname: a\norg: b\n", []string{"field org", "not a field of kind Org"}},
		{"missing key", "kind: HumanUser\norg: a\nprofile: {firstName: A}\n", []string{"field userName", "required"}},
		{"id field", "kind: OIDCApp\norg: a\nproject: p\nprojectId: '1'\nname: web\n", []string{"field projectId", "natural key"}},
		{"unset env", "kind: OIDCIdP\norg: a\nname: i\nclientSecret: ${NOPE}\n", []string{"field clientSecret", "NOPE is not set"}},
		{"the server's configuration", "kind: MachineUser\norg: a\nuserName: m\nname: M\ndescription: 'x ${GATEHOUSE_MASTER_KEY}'\n", []string{"field description", "${GATEHOUSE_MASTER_KEY} is Gatehouse's own configuration"}},
		{"the admin password", "kind: HumanUser\norg: a\nuserName: u\ninitialPassword: ${GATEHOUSE_ADMIN_PASSWORD}\n", []string{"field initialPassword", "GATEHOUSE_ADMIN_PASSWORD"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("x.yaml", []byte(tc.src), env(nil))
			var ae *Error
			if !errors.As(err, &ae) {
				t.Fatalf("err = %v; want an *apply.Error", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Fatalf("error %q lacks %q", err, w)
				}
			}
		})
	}
}

func TestCanonicalComparesEnumsAndDefaults(t *testing.T) {
	a, err := canonical(KindOIDCApp, map[string]any{"name": "web", "devMode": false, "clockSkew": "1s", "appType": "OIDC_APP_TYPE_WEB"})
	if err != nil {
		t.Fatal(err)
	}
	b, err := canonical(KindOIDCApp, map[string]any{"name": "web", "clockSkew": "1.000s", "version": "OIDC_VERSION_1_0", "clientId": "x@y"})
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"name", "devMode", "clockSkew", "appType"} {
		if !equal(a[k], b[k]) {
			t.Errorf("%s: %v vs %v", k, a[k], b[k])
		}
	}
	if !equal([]any{"ORG_OWNER", "ORG_USER_MANAGER"}, []any{"ORG_USER_MANAGER", "ORG_OWNER"}) {
		t.Error("role lists compare as sets")
	}
	if equal([]any{"a"}, []any{"a", "b"}) {
		t.Error("different lists are equal")
	}
}

// $${NAME} is a literal ${NAME}; Export writes every ${ of the data it
// read so, and Parse gives back exactly the data, whatever the
// environment holds.
func TestEscapedReferencesStayLiteral(t *testing.T) {
	data := []string{"${HOME}", "$${HOME}", "a ${GATEHOUSE_ADMIN_PASSWORD} b", "$$", "${", "cost: $5", "${1X}"}
	for _, want := range data {
		src := "kind: MachineUser\norg: a\nuserName: m\nname: M\ndescription: '" + escapeRefs(want).(string) + "'\n"
		docs, err := Parse("x.yaml", []byte(src), env(map[string]string{"HOME": "/root", "GATEHOUSE_ADMIN_PASSWORD": "secret"}))
		if err != nil {
			t.Fatalf("%q: %v", want, err)
		}
		if got := docs[0].Fields["description"]; got != want {
			t.Errorf("%q exported and parsed: %q", want, got)
		}
	}
	// The identity provider secrets Export names are read.
	docs, err := Parse("x.yaml", []byte("kind: OIDCIdP\norg: a\nname: i\nclientSecret: ${GATEHOUSE_IDP_SECRET_A_I}\n"),
		env(map[string]string{"GATEHOUSE_IDP_SECRET_A_I": "s"}))
	if err != nil || docs[0].Fields["clientSecret"] != "s" {
		t.Fatalf("identity provider secret: %v %v", docs, err)
	}
}
