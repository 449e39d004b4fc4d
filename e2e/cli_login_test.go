package e2e

import (
	"context"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"testing"
	"time"

	"golang.org/x/oauth2"

	"github.com/gatehouse-id/gatehouse/pkg/config"
)

// TestNativeAppLoopbackLogin is the gatehouse CLI's sign-in as a native app
// (RFC 8252) against the embedded server, with nothing configured: the
// directory creates the app gatehouse-cli at first start; the CLI listens
// on a loopback port the system picks, opens the browser at the
// authorization endpoint (PKCE, the management audience), the admin signs
// in on the login pages, and the code arrives at the CLI's listener. The
// access token works on the management API and the refresh token renews
// it.
func TestNativeAppLoopbackLogin(t *testing.T) {
	dir := t.TempDir()
	addr := freeAddr(t)
	issuer := "http://" + addr
	edge := startProc(t, config.RoleEdge, map[string]string{
		"GATEHOUSE_DATA_DIR": dir, "GATEHOUSE_ADDR": addr, "GATEHOUSE_ISSUER": issuer,
		"GATEHOUSE_ADMIN_PASSWORD": "Admin-Passw0rd-for-e2e",
	})

	// The CLI's listener, on a port it could not have registered.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	redirect := "http://" + ln.Addr().String() + "/callback"
	got := make(chan url.Values, 1)
	cli := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/callback" {
			got <- r.URL.Query()
		}
		_, _ = w.Write([]byte("Signed in; return to the terminal."))
	}), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = cli.Serve(ln) }()
	t.Cleanup(func() { _ = cli.Close() })

	conf := oauth2.Config{
		ClientID: "gatehouse-cli", // bootstrap.CLIClientID
		Endpoint: oauth2.Endpoint{AuthURL: issuer + "/oauth/v2/authorize", TokenURL: issuer + "/oauth/v2/token",
			AuthStyle: oauth2.AuthStyleInParams},
		RedirectURL: redirect,
		Scopes:      []string{"openid", "offline_access", "urn:gatehouse:iam:org:project:id:gatehouse:aud"},
	}
	verifier := oauth2.GenerateVerifier()

	// The browser: it follows every redirect, the last one to the CLI.
	jar, _ := cookiejar.New(nil)
	browser := &http.Client{Jar: jar, Timeout: 30 * time.Second}
	res, err := browser.Get(conf.AuthCodeURL("cli-state", oauth2.S256ChallengeOption(verifier)))
	if err != nil {
		t.Fatal(err)
	}
	page := body(t, res)
	res = submit(t, browser, edge.base, page, url.Values{"loginName": {"admin"}})
	page = body(t, res)
	res = submit(t, browser, edge.base, page, url.Values{"password": {"Admin-Passw0rd-for-e2e"}})
	final := body(t, res)
	var q url.Values
	select {
	case q = <-got:
	default:
		t.Fatalf("the CLI's listener got no callback; the browser ended at %s (%d):\n%s", res.Request.URL, res.StatusCode, final)
	}
	if q.Get("state") != "cli-state" || q.Get("code") == "" || q.Get("iss") != issuer || !strings.Contains(final, "Signed in") {
		t.Fatalf("callback %v; want the code, the state and iss", q)
	}

	// The registered, port-less URI is not the request's: the code is
	// refused for it (and stays usable).
	wrong := conf
	wrong.RedirectURL = "http://127.0.0.1/callback"
	ctx := context.Background()
	if _, err := wrong.Exchange(ctx, q.Get("code"), oauth2.VerifierOption(verifier)); err == nil || !strings.Contains(err.Error(), "invalid_grant") {
		t.Fatalf("exchange with another redirect_uri: %v; want invalid_grant", err)
	}
	tok, err := conf.Exchange(ctx, q.Get("code"), oauth2.VerifierOption(verifier))
	if err != nil {
		t.Fatalf("code exchange: %v", err)
	}
	if tok.RefreshToken == "" || tok.Extra("id_token") == nil {
		t.Fatalf("token response %+v; want a refresh token (offline_access) and an ID token", tok)
	}

	// The access token is a management token with the admin's roles.
	status, org := restJSON(t, "GET", edge.base+"/management/v1/orgs/me", tok.AccessToken, nil)
	if o, _ := org["org"].(map[string]any); status != 200 || o["name"] != "Gatehouse" {
		t.Fatalf("GetMyOrg with the CLI's token: %d %v", status, org)
	}
	status, list := restJSON(t, "POST", edge.base+"/management/v1/projects/_search", tok.AccessToken, map[string]any{
		"queries": []any{map[string]any{"nameQuery": map[string]any{"name": "Gatehouse"}}}})
	projects, _ := list["result"].([]any)
	if status != 200 || len(projects) != 1 {
		t.Fatalf("ListProjects: %d %v; want the CLI's project", status, list)
	}
	projectID := projects[0].(map[string]any)["id"].(string)
	status, apps := restJSON(t, "POST", edge.base+"/management/v1/projects/"+projectID+"/apps/_search", tok.AccessToken, map[string]any{})
	if result, _ := apps["result"].([]any); status != 200 || len(result) != 1 {
		t.Fatalf("ListApps: %d %v", status, apps)
	} else if a := result[0].(map[string]any); a["name"] != "gatehouse-cli" || a["adminClient"] != true ||
		a["oidcConfig"].(map[string]any)["clientId"] != "gatehouse-cli" || a["oidcConfig"].(map[string]any)["appType"] != "OIDC_APP_TYPE_NATIVE" {
		t.Fatalf("the CLI's app: %v", a)
	}

	// The refresh token renews the access token (rotated).
	renewed, err := conf.TokenSource(ctx, &oauth2.Token{RefreshToken: tok.RefreshToken, Expiry: time.Now().Add(-time.Hour)}).Token()
	if err != nil || renewed.AccessToken == tok.AccessToken || renewed.RefreshToken == "" || renewed.RefreshToken == tok.RefreshToken {
		t.Fatalf("refresh: %v (%+v)", err, renewed)
	}
	if status, org := restJSON(t, "GET", edge.base+"/management/v1/orgs/me", renewed.AccessToken, nil); status != 200 {
		t.Fatalf("GetMyOrg with the refreshed token: %d %v", status, org)
	}
}
