package e2e

import (
	"github.com/gatehouse-id/gatehouse/pkg/config"

	"bytes"
	"context"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// requireNodeModule returns the repository root when node and the npm
// package pkg (make node_modules) are there; it skips otherwise, except
// under CI=true, where it fails.
func requireNodeModule(t *testing.T, pkg string) string {
	t.Helper()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	var missing []string
	if _, err := exec.LookPath("node"); err != nil {
		missing = append(missing, "node (Node.js)")
	}
	if _, err := os.Stat(filepath.Join(root, "node_modules", pkg, "package.json")); err != nil {
		missing = append(missing, "node_modules/"+pkg+" (run make node_modules)")
	}
	if len(missing) > 0 {
		if os.Getenv("CI") == "true" {
			t.Fatalf("required under CI=true but missing: %v", missing)
		}
		t.Skipf("skipping: missing %v; install them or run under CI=true to make this a failure", missing)
	}
	return root
}

// personHelper signs a person in for a node test: /login?url= follows an
// authorization URL through the login pages (a fresh browser each time)
// and answers the redirect to the client; /approve?url= approves a device
// code at its verification_uri_complete.
type personHelper struct {
	issuer, base, user, password string
}

func (h *personHelper) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	target := r.URL.Query().Get("url")
	var out string
	var err error
	switch r.URL.Path {
	case "/login":
		out, err = h.login(target)
	case "/approve":
		out, err = h.approve(target)
	default:
		http.NotFound(w, r)
		return
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	_, _ = io.WriteString(w, out)
}

// page is a fetched page: its status, final URL, Location and body.
type page struct {
	status   int
	url, loc string
	body     string
}

func fetch(c *http.Client, res *http.Response, err error) (page, error) {
	if err != nil {
		return page{}, err
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return page{status: res.StatusCode, url: res.Request.URL.String(), loc: res.Header.Get("Location"), body: string(b)}, nil
}

// post submits the page's first form with its hidden fields and fields.
func (h *personHelper) post(c *http.Client, p page, fields url.Values) (page, error) {
	action := reAction.FindStringSubmatch(p.body)
	csrf := reCSRF.FindStringSubmatch(p.body)
	if action == nil || csrf == nil {
		return page{}, fmt.Errorf("no form on %s (%d):\n%s", p.url, p.status, p.body)
	}
	fields.Set("csrf", csrf[1])
	if rid := reRequestID.FindStringSubmatch(p.body); rid != nil {
		fields.Set("authRequestID", rid[1])
	}
	res, err := c.PostForm(h.base+strings.ReplaceAll(action[1], "&amp;", "&"), fields)
	return fetch(c, res, err)
}

// signIn answers the login name and password pages, and allows a consent
// page if one follows.
func (h *personHelper) signIn(c *http.Client, p page) (page, error) {
	var err error
	if p, err = h.post(c, p, url.Values{"loginName": {h.user}}); err != nil {
		return p, err
	}
	if p, err = h.post(c, p, url.Values{"password": {h.password}}); err != nil {
		return p, err
	}
	if strings.Contains(p.body, `value="accept"`) {
		return h.post(c, p, url.Values{"decision": {"accept"}})
	}
	return p, nil
}

func (h *personHelper) login(target string) (string, error) {
	c := browser(nil, h.issuer)
	res, err := c.Get(target)
	p, err := fetch(c, res, err)
	if err != nil {
		return "", err
	}
	if p, err = h.signIn(c, p); err != nil {
		return "", err
	}
	if p.loc == "" || strings.HasPrefix(p.loc, "/") {
		return "", fmt.Errorf("no redirect to the client: %d at %s\n%s", p.status, p.url, p.body)
	}
	return p.loc, nil
}

func (h *personHelper) approve(complete string) (string, error) {
	c := browser(nil, h.issuer)
	res, err := c.Get(complete)
	p, err := fetch(c, res, err)
	if err != nil {
		return "", err
	}
	u, _ := url.Parse(complete)
	if p, err = h.post(c, p, url.Values{"userCode": {u.Query().Get("user_code")}}); err != nil {
		return "", err
	}
	if p, err = h.signIn(c, p); err != nil {
		return "", err
	}
	if !strings.Contains(p.body, "Your device is signed in") {
		return "", errors.New("the device was not approved:\n" + p.body)
	}
	return "approved", nil
}

// TestRPInterop runs e2e/rp/interop.test.mjs: openid-client (PAR for an
// app that requires it, the device flow) and oauth4webapi's strict checks
// (a request object pushed with private_key_jwt, and one sent to the
// authorization endpoint) against the embedded server.
func TestRPInterop(t *testing.T) {
	t.Parallel()
	root := requireNodeModule(t, "openid-client")
	requireNodeModule(t, "oauth4webapi")
	edge, issuer, deviceClient, admin := deviceApp(t)
	_, proj := restJSON(t, "POST", edge.base+"/management/v1/projects", admin, map[string]any{"name": "Interop"})
	projectID := proj["id"].(string)
	_, rpPort, _ := net.SplitHostPort(freeAddr(t))
	redirect := "http://127.0.0.1:" + rpPort + "/cb"
	status, parApp := restJSON(t, "POST", edge.base+"/management/v1/projects/"+projectID+"/apps/oidc", admin, map[string]any{
		"name": "par-web", "redirectUris": []string{redirect}, "responseTypes": []string{"OIDC_RESPONSE_TYPE_CODE"},
		"grantTypes": []string{"OIDC_GRANT_TYPE_AUTHORIZATION_CODE"}, "appType": "OIDC_APP_TYPE_WEB",
		"authMethodType": "OIDC_AUTH_METHOD_TYPE_BASIC", "devMode": true, "requirePushedAuthorizationRequests": true,
	})
	if status != 200 {
		t.Fatalf("AddOIDCApp par-web: %d %v", status, parApp)
	}
	jar := addKeyedApp(t, edge.base, admin, projectID, "jar-web", redirect, nil)
	pkcs8, err := x509.MarshalPKCS8PrivateKey(jar.key)
	if err != nil {
		t.Fatal(err)
	}

	runNodeTest(t, root, issuer, edge.base, "interop.test.mjs",
		"GATEHOUSE_RP_REDIRECT_URI="+redirect,
		"GATEHOUSE_RP_PAR_CLIENT_ID="+parApp["clientId"].(string),
		"GATEHOUSE_RP_PAR_CLIENT_SECRET="+parApp["clientSecret"].(string),
		"GATEHOUSE_RP_DEVICE_CLIENT_ID="+deviceClient,
		"GATEHOUSE_RP_JAR_CLIENT_ID="+jar.clientID,
		"GATEHOUSE_RP_JAR_KID="+jar.kid,
		"GATEHOUSE_RP_JAR_KEY="+base64.StdEncoding.EncodeToString(pkcs8),
	)
}

// TestRPDPoP runs e2e/rp/dpop.test.mjs against the embedded server under
// GATEHOUSE_DPOP_REQUIRE_NONCE: openid-client and oauth4webapi get
// DPoP-bound tokens (retrying with the server's nonce), call userinfo and
// refresh with proofs, and resource-server.mjs checks cnf.jkt and ath
// with jose.
func TestRPDPoP(t *testing.T) {
	t.Parallel()
	root := requireNodeModule(t, "openid-client")
	requireNodeModule(t, "oauth4webapi")
	requireNodeModule(t, "jose")
	dir := t.TempDir()
	addr := freeAddr(t)
	issuer := "http://" + addr
	edge := startProc(t, config.RoleEdge, map[string]string{
		"GATEHOUSE_DATA_DIR": dir, "GATEHOUSE_ADDR": addr, "GATEHOUSE_ISSUER": issuer,
		"GATEHOUSE_ADMIN_PASSWORD": "Admin-Passw0rd-for-e2e", "GATEHOUSE_DPOP_REQUIRE_NONCE": "true",
	})
	_, tok := operatorToken(t, edge.base, dir, issuer)
	admin := tok["access_token"].(string)
	_, proj := restJSON(t, "POST", edge.base+"/management/v1/projects", admin, map[string]any{"name": "DPoP"})
	_, rpPort, _ := net.SplitHostPort(freeAddr(t))
	redirect := "http://127.0.0.1:" + rpPort + "/cb"
	status, app := restJSON(t, "POST", edge.base+"/management/v1/projects/"+proj["id"].(string)+"/apps/oidc", admin, map[string]any{
		"name": "dpop-spa", "redirectUris": []string{redirect}, "responseTypes": []string{"OIDC_RESPONSE_TYPE_CODE"},
		"grantTypes": []string{"OIDC_GRANT_TYPE_AUTHORIZATION_CODE", "OIDC_GRANT_TYPE_REFRESH_TOKEN"},
		"appType":    "OIDC_APP_TYPE_NATIVE", "authMethodType": "OIDC_AUTH_METHOD_TYPE_NONE", "accessTokenType": "OIDC_TOKEN_TYPE_JWT",
	})
	if status != 200 {
		t.Fatalf("AddOIDCApp: %d %v", status, app)
	}
	runNodeTest(t, root, issuer, edge.base, "dpop.test.mjs",
		"GATEHOUSE_RP_REDIRECT_URI="+redirect,
		"GATEHOUSE_RP_DPOP_CLIENT_ID="+app["clientId"].(string),
	)
}

// runNodeTest runs e2e/rp/<script> with node's test runner against the
// server at base (issuer), with a personHelper that signs the admin in
// (GATEHOUSE_RP_HELPER) and env added.
func runNodeTest(t *testing.T, root, issuer, base, script string, env ...string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: &personHelper{issuer: issuer, base: base, user: "admin", password: "Admin-Passw0rd-for-e2e"},
		ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })

	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", "--test", "--test-reporter=spec", "--test-concurrency=1",
		filepath.Join("e2e", "rp", script))
	cmd.Dir = root
	cmd.Env = append(append(os.Environ(), "GATEHOUSE_RP_ISSUER="+issuer, "GATEHOUSE_RP_HELPER=http://"+ln.Addr().String()), env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("node --test e2e/rp/%s: %v\n%s", script, err, out.String())
	}
	t.Logf("%s", out.String())
}
