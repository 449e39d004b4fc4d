package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gatehouse-id/gatehouse/pkg/config"
	edgesvc "github.com/gatehouse-id/gatehouse/services/edge/service"
)

// acmeYAML declares one of every kind.
const acmeYAML = `kind: Org
name: acme
---
kind: Project
org: acme
name: Shop
projectRoleAssertion: true
---
kind: OIDCApp
org: acme
project: Shop
name: web
redirectUris: [https://shop.example.com/callback]
postLogoutRedirectUris: [https://shop.example.com/]
responseTypes: [OIDC_RESPONSE_TYPE_CODE]
grantTypes: [OIDC_GRANT_TYPE_AUTHORIZATION_CODE, OIDC_GRANT_TYPE_REFRESH_TOKEN]
appType: OIDC_APP_TYPE_WEB
authMethodType: OIDC_AUTH_METHOD_TYPE_BASIC
accessTokenType: OIDC_TOKEN_TYPE_JWT
---
kind: OIDCApp
org: acme
project: Shop
name: spa
redirectUris: [https://shop.example.com/spa]
responseTypes: [OIDC_RESPONSE_TYPE_CODE]
grantTypes: [OIDC_GRANT_TYPE_AUTHORIZATION_CODE]
appType: OIDC_APP_TYPE_USER_AGENT
authMethodType: OIDC_AUTH_METHOD_TYPE_NONE
---
kind: APIApp
org: acme
project: Shop
name: orders
authMethodType: API_AUTH_METHOD_TYPE_PRIVATE_KEY_JWT
---
kind: HumanUser
org: acme
userName: alice
profile:
  firstName: Alice
  lastName: Doe
  preferredLanguage: en
email:
  email: alice@example.com
  isEmailVerified: true
initialPassword: ${ALICE_PASSWORD}
---
kind: MachineUser
org: acme
userName: ci
name: CI pipeline
description: deploys the shop
accessTokenType: ACCESS_TOKEN_TYPE_JWT
---
kind: OIDCIdP
org: acme
name: Upstream
issuer: https://accounts.example.com
clientId: gatehouse
clientSecret: ${UPSTREAM_SECRET}
scopes: [openid, email, profile]
autoRegister: true
---
kind: UserMetadata
org: acme
userName: alice
key: plan
value: Z29sZA==
---
kind: OrgMember
org: acme
userName: alice
roles: [ORG_USER_MANAGER]
`

func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestCLIApplyPlanUpdateExportRoundTrip: apply creates, a second apply
// changes nothing, a changed field is the only update, export → apply on a
// fresh server → export gives the same document.
func TestCLIApplyPlanUpdateExportRoundTrip(t *testing.T) {
	p, _, c := startCLIServer(t, nil)
	c.env = []string{"ALICE_PASSWORD=Alice-Passw0rd!", "UPSTREAM_SECRET=upstream-s3cret"}
	dir := t.TempDir()
	file := writeFile(t, dir, "acme.yaml", acmeYAML)

	// --dry-run plans and changes nothing.
	plan := c.ok("apply", "-f", file, "--dry-run", "-o", "table")
	if !strings.Contains(plan, "create    Org acme") || !strings.Contains(plan, "Plan: 10 to create, 0 to update, 0 unchanged.") {
		t.Fatalf("dry-run plan:\n%s", plan)
	}
	if strings.Contains(c.ok("orgs", "list"), `"acme"`) {
		t.Fatal("--dry-run created the organization")
	}
	// A plan that creates secrets needs somewhere to put them.
	c.fail([]string{"error:", "--secrets-out", "nothing was changed"}, "apply", "-f", file)
	if strings.Contains(c.ok("orgs", "list"), `"acme"`) {
		t.Fatal("a refused apply created the organization")
	}

	secrets := filepath.Join(dir, "secrets.yaml")
	out := c.ok("apply", "-f", file, "--secrets-out", secrets, "-o", "table")
	if !strings.Contains(out, "Applied: 10 created, 0 updated.") {
		t.Fatalf("apply:\n%s", out)
	}
	st, err := os.Stat(secrets)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("secrets file: %v; want 0600", err)
	}
	raw, _ := os.ReadFile(secrets)
	if !strings.Contains(string(raw), "clientSecret:") || !strings.Contains(string(raw), "name: web") || strings.Contains(string(raw), "name: spa") {
		t.Fatalf("secrets file:\n%s", raw)
	}
	if strings.Contains(out, "clientSecret") {
		t.Fatalf("a secret was printed:\n%s", out)
	}

	// The objects are there, as the API shows them.
	token := strings.TrimSpace(c.ok("token"))
	orgID := str(lookup(c.json("orgs", "show", "--org", "acme"), "org.id"))
	status, users := restJSONOrg(t, "POST", p.base+"/management/v1/users/_search", token, orgID, map[string]any{})
	if status != 200 || !strings.Contains(jsonString(users), `"userName":"alice"`) || !strings.Contains(jsonString(users), `"userName":"ci"`) {
		t.Fatalf("users of acme via the API: %d %v", status, users)
	}
	// alice signs in with the expanded initial password.
	// (The login itself is covered elsewhere; here the password policy
	// accepted it, or AddHumanUser would have failed.)

	// Again: nothing to do.
	again := c.ok("apply", "-f", file, "-o", "table")
	if !strings.Contains(again, "No changes: 10 unchanged.") {
		t.Fatalf("second apply:\n%s", again)
	}

	// One field changes: only that is updated.
	changed := strings.Replace(acmeYAML, "redirectUris: [https://shop.example.com/callback]", "redirectUris: [https://shop.example.com/callback, https://shop.example.com/cb2]", 1)
	changed = strings.Replace(changed, "value: Z29sZA==", "value: cGxhdGludW0=", 1)
	file2 := writeFile(t, dir, "acme2.yaml", changed)
	plan2 := c.ok("apply", "-f", file2, "--dry-run", "-o", "table")
	if !strings.Contains(plan2, "update    OIDCApp acme/Shop/web (redirectUris)") || !strings.Contains(plan2, "update    UserMetadata acme/alice/plan (value)") ||
		!strings.Contains(plan2, "Plan: 0 to create, 2 to update, 8 unchanged.") {
		t.Fatalf("plan after a change:\n%s", plan2)
	}
	c.ok("apply", "-f", file2)
	projects, _ := c.json("projects", "list", "--org", "acme")["result"].([]any)
	if len(projects) != 1 {
		t.Fatalf("projects of acme: %v", projects)
	}
	apps := jsonString(c.json("apps", "list", str(lookup(projects[0], "id")), "--org", "acme"))
	if !strings.Contains(apps, `"redirectUris":["https://shop.example.com/callback","https://shop.example.com/cb2"]`) {
		t.Fatalf("apps after the update: %s", apps)
	}
	if again := c.ok("apply", "-f", file2, "-o", "table"); !strings.Contains(again, "No changes") {
		t.Fatalf("after the update:\n%s", again)
	}
	// A field the API cannot change on an existing object is refused.
	immutable := writeFile(t, dir, "immutable.yaml", strings.Replace(changed, "name: CI pipeline", "name: Renamed", 1))
	c.fail([]string{"error:", "immutable.yaml: document 7", "MachineUser acme/ci", "field name", "cannot change"}, "apply", "-f", immutable)

	// What an organization admin types is data, never a reference to the
	// environment of whoever applies an export (their secrets, or the
	// server's own for a bootstrap file).
	if status, m := restJSONOrg(t, "POST", p.base+"/management/v1/users/human", token, orgID, map[string]any{"userName": "mallory",
		"profile": map[string]any{"firstName": "${HOME}", "lastName": "${GATEHOUSE_ADMIN_PASSWORD}"},
		"email":   map[string]any{"email": "mallory@acme.example"}}); status != 200 {
		t.Fatalf("AddHumanUser mallory: %d %v", status, m)
	}

	// Export, apply to a fresh server, export again: the same document.
	exported := c.ok("export", "--org", "acme")
	if !strings.Contains(exported, "firstName: $${HOME}") || !strings.Contains(exported, "lastName: $${GATEHOUSE_ADMIN_PASSWORD}") {
		t.Fatalf("the export does not escape the data's ${:\n%s", exported)
	}
	for _, secret := range []string{"Alice-Passw0rd!", "upstream-s3cret"} {
		if strings.Contains(exported, secret) {
			t.Fatalf("export contains a secret:\n%s", exported)
		}
	}
	if !strings.Contains(exported, "clientSecret: ${GATEHOUSE_IDP_SECRET_ACME_UPSTREAM}") {
		t.Fatalf("the exported IdP does not name its secret's variable:\n%s", exported)
	}
	_, _, c2 := startCLIServer(t, nil)
	c2.env = []string{"GATEHOUSE_IDP_SECRET_ACME_UPSTREAM=upstream-s3cret"}
	exportFile := writeFile(t, dir, "exported.yaml", exported)
	out2 := c2.ok("apply", "-f", exportFile, "--secrets-out", filepath.Join(dir, "secrets2.yaml"), "-o", "table")
	if !strings.Contains(out2, "Applied: 11 created") {
		t.Fatalf("apply of the export on a fresh server:\n%s", out2)
	}
	if again := c2.ok("export", "--org", "acme"); again != exported {
		t.Fatalf("export after the round trip differs:\nfirst:\n%s\nsecond:\n%s", exported, again)
	}
}

func jsonString(v any) string {
	raw, _ := json.Marshal(v)
	return string(raw)
}

// TestCLIApplyBadInputChangesNothing: bad YAML, unknown kinds and fields,
// a missing reference and a refused permission give clear errors and
// change nothing.
func TestCLIApplyBadInputChangesNothing(t *testing.T) {
	p, _, c := startCLIServer(t, nil)
	dir := t.TempDir()
	good := "kind: Org\nname: acme\n---\nkind: Project\norg: acme\nname: Shop\n---\n"
	cases := []struct {
		name, doc string
		want      []string
	}{
		{"bad yaml", "kind: Project\norg: acme\nname: [Shop\n", []string{"bad-yaml.yaml: document 3", "not valid YAML"}},
		{"unknown kind", "kind: Realm\nname: x\n", []string{"unknown-kind.yaml: document 3", `unknown kind "Realm"`}},
		{"unknown field", "kind: Project\norg: acme\nname: Other\ncolour: red\n", []string{"unknown-field.yaml: document 3", "field colour", "unknown field"}},
		{"missing reference", "kind: OIDCApp\norg: acme\nproject: Nope\nname: web\n", []string{"missing-reference.yaml: document 3", "field project", `no project "Nope"`}},
		{"duplicate", "kind: Project\norg: acme\nname: Shop\n", []string{"duplicate.yaml: document 3", "declared twice"}},
	}
	for _, tc := range cases {
		f := writeFile(t, dir, strings.ReplaceAll(tc.name, " ", "-")+".yaml", good+tc.doc)
		c.fail(append([]string{"error:"}, tc.want...), "apply", "-f", f)
		if strings.Contains(c.ok("orgs", "list"), `"acme"`) {
			t.Fatalf("%s: the valid documents before the bad one were applied", tc.name)
		}
	}
	// A caller without the permission: refused, nothing created.
	id := str(c.json("users", "add-machine", "--user-name", "weak", "--name", "Weak")["userId"])
	keyPath := filepath.Join(dir, "weak.json")
	c.ok("users", "keys", "add", id, "--out", keyPath)
	weak := newCLI(t)
	weak.ok("login", "--issuer", p.base, "--key-file", keyPath)
	weak.fail([]string{"error:", "permission_denied"}, "apply", "-f", writeFile(t, dir, "ok.yaml", good))
	if strings.Contains(c.ok("orgs", "list"), `"acme"`) {
		t.Fatal("a refused apply created the organization")
	}
}

// TestBootstrapPublicKeyAndFile: a cluster-style first start — the
// operator's public key (made with gatehouse keygen) and a bootstrap file
// — leaves no private key on the server, provisions the file once, and
// the operator's gatehouse apply of the same file then changes nothing.
func TestBootstrapPublicKeyAndFile(t *testing.T) {
	c := newCLI(t)
	keys := t.TempDir()
	priv, pub := filepath.Join(keys, "admin.pem"), filepath.Join(keys, "admin.pub.pem")
	c.ok("keygen", "--out", priv, "--public-out", pub)
	if st, err := os.Stat(priv); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("keygen private key: %v; want 0600", err)
	}
	pubPEM, _ := os.ReadFile(pub)
	bootFile := writeFile(t, keys, "bootstrap.yaml", acmeYAML)

	dir := t.TempDir()
	addr := freeAddr(t)
	issuer := "http://" + addr
	env := map[string]string{
		"GATEHOUSE_DATA_DIR": dir, "GATEHOUSE_ADDR": addr, "GATEHOUSE_ISSUER": issuer,
		"GATEHOUSE_BOOTSTRAP_PUBLIC_KEY": string(pubPEM), "GATEHOUSE_BOOTSTRAP_FILE": bootFile,
		"ALICE_PASSWORD": "Alice-Passw0rd!", "UPSTREAM_SECRET": "upstream-s3cret",
	}
	p := startProc(t, config.RoleEdge, env)
	if _, err := os.Stat(filepath.Join(dir, "bootstrap-admin-key.json")); !os.IsNotExist(err) {
		t.Fatalf("a private key file was written: %v", err)
	}
	var userID, keyID string
	for _, l := range p.log.Lines() {
		if strings.Contains(str(l["msg"]), "GATEHOUSE_BOOTSTRAP_PUBLIC_KEY") {
			userID, keyID = str(l["user_id"]), str(l["key_id"])
		}
	}
	if strings.Contains(p.log.String(), "upstream-s3cret") || strings.Contains(p.log.String(), "Alice-Passw0rd!") {
		t.Fatal("a secret of the bootstrap file reached the log")
	}
	c.ok("login", "--issuer", issuer, "--key-file", priv, "--user-id", userID, "--key-id", keyID)
	c.env = []string{"ALICE_PASSWORD=x", "UPSTREAM_SECRET=y"}
	if out := c.ok("apply", "-f", bootFile, "-o", "table"); !strings.Contains(out, "No changes: 10 unchanged.") {
		t.Fatalf("apply of the bootstrap file after first start:\n%s", out)
	}
	secrets := filepath.Join(dir, "bootstrap-secrets.yaml")
	if st, err := os.Stat(secrets); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("bootstrap secrets file: %v; want 0600", err)
	}

	// Applied once: a changed file on a later start changes nothing.
	p.stop(t)
	writeFile(t, keys, "bootstrap.yaml", acmeYAML+"---\nkind: Project\norg: acme\nname: Later\n")
	startProc(t, config.RoleEdge, env)
	if out := c.ok("projects", "list", "--org", "acme"); strings.Contains(out, "Later") {
		t.Fatalf("the bootstrap file was applied again on a bootstrapped store:\n%s", out)
	}

	// A bad bootstrap file stops the start with a clear error.
	bad := writeFile(t, keys, "bad.yaml", "kind: Project\norg: acme\nname: X\ncolour: red\n")
	cfg, err := config.Load(config.RoleEdge, func(k string) string {
		if k == "GATEHOUSE_BOOTSTRAP_FILE" {
			return bad
		}
		return ""
	}, edgesvc.Sections)
	if err == nil || !contains(err.Error(), "GATEHOUSE_BOOTSTRAP_FILE", "bad.yaml: document 1", "field colour") {
		t.Fatalf("config with a bad bootstrap file: %v %v", cfg, err)
	}
}

// TestShippedYAMLApplies: the files the project ships in the apply format
// work — the dev overlay's bootstrap file (as GATEHOUSE_BOOTSTRAP_FILE) and
// examples/acme.yaml (with gatehouse apply, twice).
func TestShippedYAMLApplies(t *testing.T) {
	root, _ := filepath.Abs("..")
	_, _, c := startCLIServer(t, map[string]string{"GATEHOUSE_BOOTSTRAP_FILE": filepath.Join(root, "deploy/k8s/overlays/dev/bootstrap.yaml")})
	if out := c.ok("export", "--org", "dev"); !contains(out, "name: localhost-spa", "userName: developer") {
		t.Fatalf("the dev bootstrap file was not applied:\n%s", out)
	}
	example := filepath.Join(root, "examples/acme.yaml")
	if out := c.ok("apply", "-f", example, "--secrets-out", filepath.Join(t.TempDir(), "s.yaml"), "-o", "table"); !strings.Contains(out, "Applied: 8 created, 0 updated.") {
		t.Fatalf("apply examples/acme.yaml:\n%s", out)
	}
	if out := c.ok("apply", "-f", example, "-o", "table"); !strings.Contains(out, "No changes: 8 unchanged.") {
		t.Fatalf("apply examples/acme.yaml again:\n%s", out)
	}
}
