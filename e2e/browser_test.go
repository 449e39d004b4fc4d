package e2e

import (
	"bytes"
	"context"
	"errors"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/gatehouse-id/gatehouse/pkg/config"
)

// chromiumPath is Debian's chromium (scripts/browser-deps.sh installs it);
// playwright-core's own browser download does not work on our machines.
const chromiumPath = "/usr/bin/chromium"

// browserScreenshots are the pages e2e/browser/login.test.mjs must capture.
var browserScreenshots = []string{
	"01-loginname-en.png", "02-loginname-de.png", "03-password-de.png",
	"04-password-error-de.png", "05-callback.png", "06-logout-confirm-en.png", "07-loggedout-en.png",
	"08-error-en.png", "09-consent-en.png", "10-consent-callback.png", "11-idp-button-en.png", "12-upstream-login.png",
	"13-idp-callback.png",
}

// requireBrowser returns the repository root when node, the system
// Chromium and playwright-core are there. Otherwise it skips the test, or
// fails it under CI=true, where the browser test must run.
func requireBrowser(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	var missing []string
	if _, err := exec.LookPath("node"); err != nil {
		missing = append(missing, "node (Node.js)")
	}
	if _, err := os.Stat(chromiumPath); err != nil {
		missing = append(missing, chromiumPath+" (run scripts/browser-deps.sh)")
	}
	if _, err := os.Stat(filepath.Join(root, "node_modules", "playwright-core", "package.json")); err != nil {
		missing = append(missing, "node_modules/playwright-core (run make node_modules)")
	}
	if len(missing) > 0 {
		if os.Getenv("CI") == "true" {
			t.Fatalf("the browser test is required under CI=true but these are missing: %v", missing)
		}
		t.Skipf("skipping the browser test: missing %v; install them or run under CI=true to make this a failure", missing)
	}
	return root
}

// TestBrowserLogin drives the real login pages of the embedded server in
// headless Chromium (e2e/browser/login.test.mjs, run by node's test
// runner): sign in, switch language, a wrong password, logout, the error
// page. Screenshots of every page go to test-artifacts/browser/.
func TestBrowserLogin(t *testing.T) {
	root := requireBrowser(t)
	dir := t.TempDir()
	addr := freeAddr(t)
	issuer := "http://" + addr
	const password = "Admin-Passw0rd-for-browser"
	edge := startProc(t, config.RoleEdge, map[string]string{
		"GATEHOUSE_DATA_DIR": dir, "GATEHOUSE_ADDR": addr, "GATEHOUSE_ISSUER": issuer,
		"GATEHOUSE_ADMIN_PASSWORD": password, "GATEHOUSE_IDP_ALLOW_LOOPBACK": "true",
	})
	_, tok := operatorToken(t, edge.base, dir, issuer)
	admin := tok["access_token"].(string)
	status, proj := restJSON(t, "POST", edge.base+"/management/v1/projects", admin, map[string]any{"name": "Shop"})
	if status != 200 {
		t.Fatalf("AddProject: %d %v", status, proj)
	}
	// The relying party's port is closed: the browser test intercepts the
	// redirect, so nothing ever listens there.
	redirect := "http://" + freeAddr(t) + "/cb"
	status, app := restJSON(t, "POST", edge.base+"/management/v1/projects/"+proj["id"].(string)+"/apps/oidc", admin, map[string]any{
		"name": "shop-web", "redirectUris": []string{redirect},
		"responseTypes": []string{"OIDC_RESPONSE_TYPE_CODE"},
		"grantTypes":    []string{"OIDC_GRANT_TYPE_AUTHORIZATION_CODE"},
		"appType":       "OIDC_APP_TYPE_WEB", "authMethodType": "OIDC_AUTH_METHOD_TYPE_BASIC",
	})
	if status != 200 {
		t.Fatalf("AddOIDCApp: %d %v", status, app)
	}
	// A partner organization whose user signs in to the shop once the
	// project is granted to it, after consenting.
	status, partner := restJSON(t, "POST", edge.base+"/management/v1/orgs", admin, map[string]any{"name": "Partner"})
	if status != 200 {
		t.Fatalf("AddOrg: %d %v", status, partner)
	}
	partnerID := partner["id"].(string)
	if status, r := restJSONOrg(t, "POST", edge.base+"/management/v1/users/human/_import", admin, partnerID, map[string]any{
		"userName": "pat", "profile": map[string]any{"firstName": "Pat", "lastName": "Partner"},
		"email": map[string]any{"email": "pat@partner.example"}, "password": "Pat-Passw0rd!1"}); status != 200 {
		t.Fatalf("import pat: %d %v", status, r)
	}
	if status, r := restJSON(t, "POST", edge.base+"/management/v1/projects/"+proj["id"].(string)+"/grants", admin,
		map[string]any{"grantedOrgId": partnerID}); status != 200 {
		t.Fatalf("AddProjectGrant: %d %v", status, r)
	}
	// An upstream Gatehouse as the shop's identity provider: the login page
	// shows its button.
	up := startUpstream(t, issuer+"/idps/callback")
	if status, r := restJSON(t, "POST", edge.base+"/management/v1/idps/oidc", admin, map[string]any{
		"name": "Upstream", "clientId": up.clientID, "clientSecret": up.secret, "issuer": up.issuer,
		"scopes": []string{"openid", "profile", "email"}, "autoRegister": true}); status != 200 {
		t.Fatalf("AddOrgOIDCIDP: %d %v", status, r)
	}
	const state = "browser-state-1"
	authorize := issuer + "/oauth/v2/authorize?" + url.Values{
		"client_id": {app["clientId"].(string)}, "redirect_uri": {redirect}, "response_type": {"code"},
		"scope": {"openid"}, "state": {state}, "nonce": {"browser-nonce-1"},
	}.Encode()

	artifacts := browserArtifacts(t, root, "")

	runBrowserScript(t, root, "login.test.mjs", artifacts, 90*time.Second,
		"GATEHOUSE_BROWSER_ISSUER="+issuer,
		"GATEHOUSE_BROWSER_AUTHORIZE_URL="+authorize,
		"GATEHOUSE_BROWSER_REDIRECT_URI="+redirect,
		"GATEHOUSE_BROWSER_STATE="+state,
		"GATEHOUSE_BROWSER_LOGIN_NAME=admin",
		"GATEHOUSE_BROWSER_PASSWORD="+password,
		"GATEHOUSE_BROWSER_PARTNER_ORG="+partnerID,
		"GATEHOUSE_BROWSER_PARTNER_LOGIN=pat",
		"GATEHOUSE_BROWSER_PARTNER_PASSWORD=Pat-Passw0rd!1",
		"GATEHOUSE_BROWSER_UPSTREAM="+up.issuer,
	)
	checkScreenshots(t, artifacts, browserScreenshots)
}

// runBrowserScript runs e2e/browser/script with node's test runner (the
// environment adds env, the artifacts folder and the Chromium path) and
// fails t when it fails or outlasts timeout.
func runBrowserScript(t *testing.T, root, script, artifacts string, timeout time.Duration, env ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", "--test", "--test-reporter=spec",
		"--test-timeout="+strconv.Itoa(int((timeout-30*time.Second)/time.Millisecond)), filepath.Join("e2e", "browser", script))
	cmd.Dir = root
	// On timeout, SIGTERM lets Playwright close Chromium; SIGKILL follows.
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 10 * time.Second
	cmd.Env = append(append(os.Environ(), env...),
		"GATEHOUSE_BROWSER_ARTIFACTS="+artifacts, "GATEHOUSE_BROWSER_CHROMIUM="+chromiumPath)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		t.Fatalf("node did not finish in time:\n%s", out.String())
	}
	if err != nil {
		t.Fatalf("browser test failed (%v); screenshots in %s:\n%s", err, artifacts, out.String())
	}
	t.Logf("node --test e2e/browser/%s:\n%s", script, out.String())
}

// checkScreenshots: node reporting success is not enough, every page
// must have been captured as a real PNG.
func checkScreenshots(t *testing.T, artifacts string, names []string) {
	t.Helper()
	for _, name := range names {
		b, err := os.ReadFile(filepath.Join(artifacts, name))
		if err != nil {
			t.Errorf("screenshot missing: %v", err)
			continue
		}
		if !bytes.HasPrefix(b, []byte("\x89PNG\r\n\x1a\n")) || len(b) < 1000 {
			t.Errorf("%s is not a PNG screenshot (%d bytes)", name, len(b))
		}
	}
}

// browserArtifacts empties and returns the screenshot folder of one
// browser test: test-artifacts/browser/sub, or test-artifacts/browser's
// own files (not its subfolders, other tests' screenshots) for sub "".
func browserArtifacts(t *testing.T, root, sub string) string {
	t.Helper()
	dir := filepath.Join(root, "test-artifacts", "browser", sub)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if !e.IsDir() {
			if err := os.Remove(filepath.Join(dir, e.Name())); err != nil {
				t.Fatal(err)
			}
		}
	}
	return dir
}
