package e2e

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/gatehouse-id/gatehouse/pkg/config"
)

// The gatehouse binary, built once per test run from cli/cmd/gatehouse.
var (
	cliOnce sync.Once
	cliDir  string
	cliBin  string
	cliErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	for _, dir := range []string{cliDir, serviceBins.dir} {
		if dir != "" {
			os.RemoveAll(dir)
		}
	}
	os.Exit(code)
}

func gatehouseBinary(t *testing.T) string {
	t.Helper()
	cliOnce.Do(func() {
		if cliDir, cliErr = os.MkdirTemp("", "gatehouse-cli-"); cliErr != nil {
			return
		}
		cliBin = filepath.Join(cliDir, "gatehouse")
		out, err := exec.Command("go", "build", "-o", cliBin, "github.com/gatehouse-id/gatehouse/cli/cmd/gatehouse").CombinedOutput()
		if err != nil {
			cliErr = fmt.Errorf("go build the gatehouse CLI: %v\n%s", err, out)
		}
	})
	if cliErr != nil {
		t.Fatal(cliErr)
	}
	return cliBin
}

// cli runs the built binary with its own contexts file.
type cli struct {
	t    *testing.T
	bin  string
	home string
	env  []string
}

func newCLI(t *testing.T) *cli {
	home := t.TempDir()
	return &cli{t: t, bin: gatehouseBinary(t), home: home}
}

func (c *cli) configPath() string {
	return filepath.Join(c.home, "config", "gatehouse", "contexts.json")
}

// run returns stdout, stderr and the exit status.
func (c *cli) run(args ...string) (string, string, int) {
	c.t.Helper()
	cmd := exec.Command(c.bin, args...)
	cmd.Env = append([]string{"HOME=" + c.home, "XDG_CONFIG_HOME=" + filepath.Join(c.home, "config"), "PATH=" + os.Getenv("PATH")}, c.env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		c.t.Fatalf("run gatehouse %v: %v", args, err)
	}
	return out.String(), errb.String(), code
}

// ok runs a command that must succeed and returns its stdout.
func (c *cli) ok(args ...string) string {
	c.t.Helper()
	out, errOut, code := c.run(args...)
	if code != 0 {
		c.t.Fatalf("gatehouse %s: exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), code, out, errOut)
	}
	return out
}

// json runs a command with -o json and decodes its output.
func (c *cli) json(args ...string) map[string]any {
	c.t.Helper()
	out := c.ok(append(args, "-o", "json")...)
	var m map[string]any
	if err := json.Unmarshal([]byte(out), &m); err != nil {
		c.t.Fatalf("gatehouse %s -o json: not JSON: %v\n%s", strings.Join(args, " "), err, out)
	}
	return m
}

// fail runs a command that must fail with one line on stderr containing
// every sub-string of want.
func (c *cli) fail(want []string, args ...string) string {
	c.t.Helper()
	out, errOut, code := c.run(args...)
	line := strings.TrimSpace(errOut)
	if code == 0 || strings.Contains(line, "\n") || !contains(line, want...) {
		c.t.Fatalf("gatehouse %s: exit %d, stderr %q; want a non-zero exit and one line with %q (stdout %q)", strings.Join(args, " "), code, errOut, want, out)
	}
	return line
}

func str(v any) string { s, _ := v.(string); return s }

// startCLIServer starts an embedded server and signs the CLI in with the
// bootstrap admin's key file.
func startCLIServer(t *testing.T, env map[string]string) (*proc, string, *cli) {
	t.Helper()
	dir := t.TempDir()
	addr := freeAddr(t)
	issuer := "http://" + addr
	if env == nil {
		env = map[string]string{}
	}
	env["GATEHOUSE_DATA_DIR"], env["GATEHOUSE_ADDR"], env["GATEHOUSE_ISSUER"] = dir, addr, issuer
	p := startProc(t, config.RoleEdge, env)
	c := newCLI(t)
	if _, ok := env["GATEHOUSE_BOOTSTRAP_PUBLIC_KEY"]; !ok {
		c.ok("login", "--issuer", issuer, "--key-file", filepath.Join(dir, "bootstrap-admin-key.json"))
	}
	return p, dir, c
}

func TestCLIKeyFileLoginContextsAndLogout(t *testing.T) {
	p, dir, c := startCLIServer(t, nil)
	st, err := os.Stat(c.configPath())
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("contexts file: %v, mode %v; want 0600", err, st.Mode())
	}
	var kf keyFile
	raw, _ := os.ReadFile(filepath.Join(dir, "bootstrap-admin-key.json"))
	_ = json.Unmarshal(raw, &kf)

	who := c.json("whoami")
	if who["userId"] != kf.UserID || who["orgName"] != "Gatehouse" || who["issuer"] != p.base {
		t.Fatalf("whoami = %v; want user %s of org Gatehouse at %s", who, kf.UserID, p.base)
	}
	token := strings.TrimSpace(c.ok("token"))
	if status, org := restJSON(t, "GET", p.base+"/management/v1/orgs/me", token, nil); status != 200 || org["org"] == nil {
		t.Fatalf("the printed token on the management API: %d %v", status, org)
	}
	// A table by default is for terminals; a pipe gets JSON.
	if out := c.ok("orgs", "show"); !json.Valid([]byte(out)) {
		t.Fatalf("output to a pipe is not JSON by default: %q", out)
	}
	if out := c.ok("orgs", "show", "-o", "table"); !strings.HasPrefix(out, "ID") || !strings.Contains(out, "Gatehouse") {
		t.Fatalf("-o table: %q", out)
	}
	if out := c.ok("orgs", "show", "-o", "yaml"); !strings.Contains(out, "name: Gatehouse") {
		t.Fatalf("-o yaml: %q", out)
	}

	// A second context, then switch back and forth.
	c.ok("login", "--issuer", p.base, "--key-file", filepath.Join(dir, "bootstrap-admin-key.json"), "--name", "second")
	list := c.json("context", "list")
	if rows, _ := list["contexts"].([]any); len(rows) != 2 {
		t.Fatalf("context list: %v", list)
	}
	c.ok("context", "use", strings.TrimPrefix(p.base, "http://"))
	if who := c.json("whoami"); who["context"] != strings.TrimPrefix(p.base, "http://") {
		t.Fatalf("context use: whoami %v", who)
	}
	c.fail([]string{"error:", `no context "nope"`}, "context", "use", "nope")

	// A machine user authenticates at the revocation endpoint with its key,
	// but only its own tokens are revoked: another's stays valid.
	other := c.json("users", "add-machine", "--user-name", "other", "--name", "Other")
	otherKeyPath := filepath.Join(t.TempDir(), "other.json")
	c.ok("users", "keys", "add", str(other["userId"]), "--out", otherKeyPath)
	var otherKey keyFile
	raw, _ = os.ReadFile(otherKeyPath)
	_ = json.Unmarshal(raw, &otherKey)
	status, body := postForm(t, p.base+"/oauth/v2/revoke", url.Values{
		"token": {token}, "client_assertion_type": {"urn:ietf:params:oauth:client-assertion-type:jwt-bearer"},
		"client_assertion": {jwtProfileAssertion(t, otherKey, p.base)},
	})
	if status != 200 {
		t.Fatalf("revoke by another machine user: %d %v", status, body)
	}
	if status, _ := restJSON(t, "GET", p.base+"/management/v1/orgs/me", token, nil); status != 200 {
		t.Fatalf("another machine user revoked the admin's token: %d", status)
	}

	// logout revokes: the token stops working at once.
	// (The management API caches introspection for up to 10 s; userinfo
	// asks the revocation list itself.)
	c.ok("logout")
	if status, _ := restJSON(t, "GET", p.base+"/oidc/v1/userinfo", token, nil); status != 401 {
		t.Fatalf("the token after logout at userinfo: %d; want 401", status)
	}
	// The context stays, but signed out: its copy of the key is gone, so
	// nothing signs in again until gatehouse login.
	host := strings.TrimPrefix(p.base, "http://")
	c.fail([]string{"error: context " + host + ": not logged in; run gatehouse login"}, "whoami")
	var cf struct {
		Contexts map[string]map[string]any `json:"contexts"`
	}
	if raw, _ := os.ReadFile(c.configPath()); json.Unmarshal(raw, &cf) != nil || cf.Contexts[host] == nil || cf.Contexts[host]["keyFile"] != nil {
		t.Fatalf("the context after logout: %v; want it kept without its key", cf.Contexts[host])
	}
	c.ok("login", "--issuer", p.base, "--key-file", filepath.Join(dir, "bootstrap-admin-key.json"), "--context", host)
	if who := c.json("whoami"); who["userId"] != kf.UserID {
		t.Fatalf("after logout and a new sign-in: %v", who)
	}
	// Shell completion is there.
	if out := c.ok("completion", "bash"); !strings.Contains(out, "__start_gatehouse") {
		t.Fatalf("completion bash: %.200q", out)
	}
}

func TestCLIErrorsAreOneLine(t *testing.T) {
	p, _, c := startCLIServer(t, nil)
	c.fail([]string{"error: not_found:"}, "users", "show", "123456789")
	c.fail([]string{"error: invalid_argument:"}, "orgs", "create", strings.Repeat("x", 300))
	c.fail([]string{"error:", "-o", "table, json, yaml"}, "orgs", "show", "-o", "xml")
	c.fail([]string{`error: unknown command "lst" for "gatehouse users"`, "did you mean list?"}, "users", "lst")
	// -o jsonpath: a path the response lacks fails.
	if out := c.ok("orgs", "show", "-o", "jsonpath={.org.name}"); out != "Gatehouse\n" {
		t.Fatalf("-o jsonpath={.org.name}: %q", out)
	}
	c.fail([]string{`error: -o jsonpath={.org.nmae}: matches nothing: no key "nmae" in .org`}, "orgs", "show", "-o", "jsonpath={.org.nmae}")
	if out := c.ok("--version"); !strings.HasPrefix(out, "gatehouse ") {
		t.Fatalf("--version: %q", out)
	}
	c.fail([]string{"error: --app-type:", `unknown value "DESKTOP"`, "NATIVE"}, "apps", "create-oidc", "1", "--name", "x", "--app-type", "DESKTOP")

	// A machine user without roles: every management call is refused.
	id := str(c.json("users", "add-machine", "--user-name", "norole", "--name", "No role")["userId"])
	keyPath := filepath.Join(t.TempDir(), "norole.json")
	c.ok("users", "keys", "add", id, "--out", keyPath)
	st, err := os.Stat(keyPath)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("key file: %v %v; want 0600", err, st)
	}
	weak := newCLI(t)
	weak.ok("login", "--issuer", p.base, "--key-file", keyPath)
	// It can still see who it is, and that it holds no roles.
	if who := weak.json("whoami"); who["userId"] != id || who["orgName"] != "Gatehouse" || who["orgId"] == nil || who["orgsWithRoles"] != 0.0 {
		t.Fatalf("whoami without roles: %v", who)
	}
	weak.fail([]string{"error: permission_denied:"}, "orgs", "create", "takeover")
	weak.fail([]string{"error: permission_denied:"}, "users", "list")
	if orgs := c.json("orgs", "list"); strings.Contains(fmt.Sprint(orgs), "takeover") {
		t.Fatalf("a refused call created an organization: %v", orgs)
	}
	// Not logged in at all.
	newCLI(t).fail([]string{"error: not logged in"}, "users", "list")

	// ZITADEL's org header is refused with a pointer to ours, never
	// silently run in the caller's own organization.
	token := strings.TrimSpace(c.ok("token"))
	res, body := do(t, "GET", p.base+"/management/v1/orgs/me", nil, map[string]string{"Authorization": "Bearer " + token, "x-zitadel-orgid": "123"})
	if res.StatusCode != 400 || !contains(body, "x-zitadel-orgid", "x-service-orgid") {
		t.Fatalf("x-zitadel-orgid: %d %s; want 400 naming x-service-orgid", res.StatusCode, body)
	}
}

// TestCLIResourceFamilies runs every command family once and checks the
// JSON output against the management API.
func TestCLIResourceFamilies(t *testing.T) {
	p, _, c := startCLIServer(t, nil)
	token := strings.TrimSpace(c.ok("token"))
	api := func(method, path, org string, body any) map[string]any {
		t.Helper()
		status, m := restJSONOrg(t, method, p.base+path, token, org, body)
		if status != 200 {
			t.Fatalf("%s %s: %d %v", method, path, status, m)
		}
		return m
	}

	// orgs
	orgID := str(c.json("orgs", "create", "acme")["id"])
	if orgID == "" {
		t.Fatal("orgs create: no id")
	}
	if got := c.json("orgs", "show", "--org", "acme"); lookup(got, "org.id") != orgID {
		t.Fatalf("orgs show --org acme (by name): %v", got)
	}
	if got := c.json("orgs", "show", "--org", orgID); lookup(got, "org.name") != "acme" {
		t.Fatalf("orgs show --org ID: %v", got)
	}
	if !strings.Contains(fmt.Sprint(c.json("orgs", "list")["result"]), orgID) {
		t.Fatal("orgs list lacks acme")
	}
	in := func(args ...string) []string { return append(args, "--org", "acme") }

	// projects and grants
	projectID := str(c.json(in("projects", "create", "Shop")...)["id"])
	if got := api("GET", "/management/v1/projects/"+projectID, orgID, nil); lookup(got, "project.name") != "Shop" {
		t.Fatalf("project via the API: %v", got)
	}
	if got := c.json(in("projects", "show", projectID)...); lookup(got, "project.id") != projectID {
		t.Fatalf("projects show: %v", got)
	}
	if !strings.Contains(fmt.Sprint(c.json(in("projects", "list")...)["result"]), projectID) {
		t.Fatal("projects list lacks Shop")
	}
	partner := str(c.json("orgs", "create", "partner")["id"])
	grantID := str(c.json(in("projects", "grants", "add", projectID, "--granted-org-id", partner)...)["grantId"])
	if !strings.Contains(fmt.Sprint(c.json(in("projects", "grants", "list", projectID)...)["result"]), grantID) {
		t.Fatal("grants list lacks the grant")
	}
	c.ok(in("projects", "grants", "remove", projectID, grantID)...)

	// apps
	web := c.json(in("apps", "create-oidc", projectID, "--name", "web", "--redirect-uri", "https://shop.example.com/cb",
		"--response-type", "CODE", "--grant-type", "AUTHORIZATION_CODE", "--app-type", "WEB", "--auth-method-type", "BASIC")...)
	appID, clientID := str(web["appId"]), str(web["clientId"])
	if appID == "" || clientID == "" || str(web["clientSecret"]) == "" {
		t.Fatalf("apps create-oidc: %v", web)
	}
	got := api("GET", "/management/v1/projects/"+projectID+"/apps/"+appID, orgID, nil)
	if lookup(got, "app.oidcConfig.clientId") != clientID {
		t.Fatalf("app via the API: %v", got)
	}
	c.ok(in("apps", "update-oidc", projectID, appID, "--redirect-uri", "https://shop.example.com/cb2",
		"--response-type", "CODE", "--grant-type", "AUTHORIZATION_CODE", "--app-type", "WEB", "--auth-method-type", "BASIC")...)
	shown := c.json(in("apps", "show", projectID, appID)...)
	if fmt.Sprint(lookup(shown, "app.oidcConfig.redirectUris")) != "[https://shop.example.com/cb2]" {
		t.Fatalf("apps update-oidc then show: %v", shown)
	}
	if s := str(c.json(in("apps", "regenerate-secret", projectID, appID)...)["clientSecret"]); s == "" || s == str(web["clientSecret"]) {
		t.Fatalf("apps regenerate-secret: %q", s)
	}
	apiApp := c.json(in("apps", "create-api", projectID, "--name", "orders", "--auth-method-type", "PRIVATE_KEY_JWT")...)
	apiAppID := str(apiApp["appId"])
	if !strings.Contains(fmt.Sprint(c.json(in("apps", "list", projectID)...)["result"]), apiAppID) {
		t.Fatal("apps list lacks the API app")
	}
	keyPath := filepath.Join(t.TempDir(), "app-key.json")
	keyOut := c.json(in("apps", "keys", "add", projectID, apiAppID, "--out", keyPath)...)
	if st, err := os.Stat(keyPath); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("app key file: %v; want 0600", err)
	}
	var appKey map[string]any
	raw, _ := os.ReadFile(keyPath)
	if json.Unmarshal(raw, &appKey) != nil || appKey["type"] != "application" || appKey["keyId"] != keyOut["keyId"] || strings.Contains(fmt.Sprint(keyOut), "PRIVATE KEY") {
		t.Fatalf("app key file %s, output %v", raw, keyOut)
	}
	c.fail([]string{"error:", "--out"}, in("apps", "keys", "add", projectID, apiAppID)...)
	c.ok(in("apps", "keys", "remove", projectID, apiAppID, str(keyOut["keyId"]))...)

	// users
	alice := str(c.json(in("users", "add-human", "--user-name", "alice", "--first-name", "Alice", "--last-name", "Doe",
		"--email", "alice@example.com", "--initial-password", "Initial-Passw0rd!")...)["userId"])
	if got := api("GET", "/management/v1/users/"+alice, orgID, nil); lookup(got, "user.userName") != "alice" {
		t.Fatalf("user via the API: %v", got)
	}
	if got := c.json(in("users", "show", alice)...); lookup(got, "user.human.profile.firstName") != "Alice" {
		t.Fatalf("users show: %v", got)
	}
	if !strings.Contains(fmt.Sprint(c.json(in("users", "list")...)["result"]), alice) {
		t.Fatal("users list lacks alice")
	}
	c.ok(in("users", "set-password", alice, "--password", "Second-Passw0rd!", "--no-change-required")...)
	c.ok(in("users", "deactivate", alice)...)
	if got := api("GET", "/management/v1/users/"+alice, orgID, nil); lookup(got, "user.state") != "USER_STATE_INACTIVE" {
		t.Fatalf("after deactivate: %v", got)
	}
	c.ok(in("users", "reactivate", alice)...)
	if got := c.json(in("users", "unlock", alice)...); lookup(got, "details.sequence") == nil {
		t.Fatalf("users unlock: %v", got)
	}
	importFile := filepath.Join(t.TempDir(), "bob.yaml")
	_ = os.WriteFile(importFile, []byte("userName: bob\nprofile: {firstName: Bob, lastName: Roe}\nemail: {email: bob@example.com, isEmailVerified: true}\npassword: Imported-Passw0rd!\n"), 0o600)
	bob := str(c.json(in("users", "import", "-f", importFile)...)["userId"])
	if got := api("GET", "/management/v1/users/"+bob, orgID, nil); lookup(got, "user.human.email.email") != "bob@example.com" {
		t.Fatalf("imported user via the API: %v", got)
	}
	// metadata
	c.ok(in("users", "metadata", "set", alice, "plan", "gold")...)
	c.ok(in("users", "metadata", "set", alice, "tier", "1")...)
	md := c.json(in("users", "metadata", "get", alice, "plan")...)
	if lookup(md, "metadata.value") != base64.StdEncoding.EncodeToString([]byte("gold")) {
		t.Fatalf("metadata get: %v", md)
	}
	if rows, _ := c.json(in("users", "metadata", "list", alice)...)["result"].([]any); len(rows) != 2 {
		t.Fatalf("metadata list: %v", rows)
	}
	c.ok(in("users", "metadata", "remove", alice, "plan")...)
	c.ok(in("users", "metadata", "bulk-remove", alice, "--key", "tier")...)
	if rows, _ := c.json(in("users", "metadata", "list", alice)...)["result"].([]any); len(rows) != 0 {
		t.Fatalf("metadata after remove: %v", rows)
	}
	// machine users, keys, secrets
	ci := str(c.json(in("users", "add-machine", "--user-name", "ci", "--name", "CI", "--access-token-type", "JWT")...)["userId"])
	ciKey := c.json(in("users", "keys", "add", ci, "--out", filepath.Join(t.TempDir(), "ci.json"))...)
	if !strings.Contains(fmt.Sprint(c.json(in("users", "keys", "list", ci)...)["result"]), str(ciKey["keyId"])) {
		t.Fatal("users keys list lacks the key")
	}
	c.ok(in("users", "keys", "remove", ci, str(ciKey["keyId"]))...)
	sec := c.json(in("users", "secret", "generate", ci)...)
	if str(sec["clientSecret"]) == "" {
		t.Fatalf("secret generate: %v", sec)
	}
	c.ok(in("users", "secret", "remove", ci)...)
	c.ok(in("users", "idps", "list", alice)...)

	// members
	c.ok(in("members", "add", alice, "--role", "ORG_USER_MANAGER")...)
	if !strings.Contains(fmt.Sprint(c.json(in("members", "list")...)["result"]), alice) {
		t.Fatal("members list lacks alice")
	}
	c.ok(in("members", "remove", alice)...)

	// IdPs
	idp := c.json(in("idps", "add-oidc", "--name", "Upstream", "--issuer", "https://accounts.example.com", "--client-id", "gh",
		"--client-secret", "s3cret", "--scope", "openid", "--scope", "email")...)
	idpID := str(idp["idpId"])
	if idp["redirectUri"] != p.base+"/idps/callback" {
		t.Fatalf("idps add-oidc: %v", idp)
	}
	shownIdP := c.json(in("idps", "show", idpID)...)
	if lookup(shownIdP, "idp.redirectUri") != p.base+"/idps/callback" || lookup(shownIdP, "idp.name") != "Upstream" || strings.Contains(fmt.Sprint(shownIdP), "s3cret") {
		t.Fatalf("idps show: %v", shownIdP)
	}
	// A new issuer comes with the secret (the stored one goes only to its own provider).
	c.fail([]string{"client_secret", "required when the issuer or client id changes"}, in("idps", "update", idpID, "--issuer", "https://accounts2.example.com", "--client-id", "gh", "--scope", "openid")...)
	c.ok(in("idps", "update", idpID, "--issuer", "https://accounts2.example.com", "--client-id", "gh", "--client-secret", "s3cret-2", "--scope", "openid")...)
	if got := api("GET", "/management/v1/idps/"+idpID, orgID, nil); lookup(got, "idp.oidcConfig.issuer") != "https://accounts2.example.com" {
		t.Fatalf("IdP via the API after update: %v", got)
	}
	c.ok(in("idps", "deactivate", idpID)...)
	c.ok(in("idps", "reactivate", idpID)...)
	if !strings.Contains(fmt.Sprint(c.json(in("idps", "list")...)["result"]), idpID) {
		t.Fatal("idps list lacks the IdP")
	}
	c.ok(in("idps", "remove", idpID)...)

	// login policy
	c.ok(in("login-policy", "show")...)

	// signing keys
	before, _ := c.json("keys", "list")["keys"].([]any)
	rotated := c.json("keys", "rotate")
	after, _ := c.json("keys", "list")["keys"].([]any)
	if str(rotated["keyId"]) == "" || len(after) != len(before)+1 {
		t.Fatalf("keys rotate: %v; keys %d → %d", rotated, len(before), len(after))
	}

	c.ok(in("users", "remove", bob)...)
	c.fail([]string{"error: not_found:"}, in("users", "show", bob)...)
}

func lookup(v any, path string) any {
	for _, k := range strings.Split(path, ".") {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[k]
	}
	return v
}
