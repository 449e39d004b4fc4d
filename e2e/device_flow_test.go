package e2e

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"

	"github.com/gatehouse-id/gatehouse/pkg/config"
)

var reUserCode = regexp.MustCompile(`^[BCDFGHJKLMNPQRSTVWXZ]{4}-[BCDFGHJKLMNPQRSTVWXZ]{4}$`)

// deviceApp starts the embedded server and registers a public native app
// for the device authorization grant (and refresh); it returns the server,
// the app's client id and an admin token.
func deviceApp(t *testing.T) (edge *proc, issuer, clientID, admin string) {
	t.Helper()
	dir := t.TempDir()
	addr := freeAddr(t)
	issuer = "http://" + addr
	edge = startProc(t, config.RoleEdge, map[string]string{
		"GATEHOUSE_DATA_DIR": dir, "GATEHOUSE_ADDR": addr, "GATEHOUSE_ISSUER": issuer,
		"GATEHOUSE_ADMIN_PASSWORD": "Admin-Passw0rd-for-e2e",
	})
	_, tok := operatorToken(t, edge.base, dir, issuer)
	admin = tok["access_token"].(string)
	_, proj := restJSON(t, "POST", edge.base+"/management/v1/projects", admin, map[string]any{"name": "TV"})
	status, app := restJSON(t, "POST", edge.base+"/management/v1/projects/"+proj["id"].(string)+"/apps/oidc", admin, map[string]any{
		"name": "living-room-tv", "redirectUris": []string{},
		"grantTypes": []string{"OIDC_GRANT_TYPE_DEVICE_CODE", "OIDC_GRANT_TYPE_REFRESH_TOKEN"},
		"appType":    "OIDC_APP_TYPE_NATIVE", "authMethodType": "OIDC_AUTH_METHOD_TYPE_NONE", "accessTokenType": "OIDC_TOKEN_TYPE_JWT",
	})
	if status != 200 {
		t.Fatalf("AddOIDCApp: %d %v", status, app)
	}
	return edge, issuer, app["clientId"].(string), admin
}

var reDeviceForm = regexp.MustCompile(`<form method="post" action="(/device[^"]*)"`)

// enterUserCode opens verification_uri_complete in c and confirms the
// prefilled code; it returns the response (the login page, or the
// consent page for a browser signed in already).
func enterUserCode(t *testing.T, c *http.Client, base, complete, typed string) *http.Response {
	t.Helper()
	res, err := c.Get(complete)
	if err != nil {
		t.Fatal(err)
	}
	page := body(t, res)
	csrf, action := reCSRF.FindStringSubmatch(page), reDeviceForm.FindStringSubmatch(page)
	if res.StatusCode != 200 || csrf == nil || action == nil {
		t.Fatalf("device page: %d\n%s", res.StatusCode, page)
	}
	u, _ := url.Parse(complete)
	if typed == "" {
		typed = u.Query().Get("user_code")
		if !strings.Contains(page, `value="`+typed+`"`) {
			t.Fatalf("the code is not prefilled:\n%s", page)
		}
	}
	res, err = c.PostForm(base+strings.ReplaceAll(action[1], "&amp;", "&"), url.Values{"csrf": {csrf[1]}, "userCode": {typed}})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// TestDeviceAuthorizationGrant: a device signs in with x/oauth2's device
// flow (RFC 8628) while a person approves in a browser through the real
// pages: polling answers, the code typed in another case without the dash,
// wrong codes, the consent page showing the code, tokens exactly once
// (ID token verified by go-oidc, refresh), and a denial.
func TestDeviceAuthorizationGrant(t *testing.T) {
	t.Parallel()
	edge, issuer, clientID, _ := deviceApp(t)
	ctx := context.Background()
	provider, err := oidc.NewProvider(ctx, issuer)
	if err != nil {
		t.Fatal(err)
	}
	if provider.Endpoint().DeviceAuthURL != issuer+"/oauth/v2/device_authorization" {
		t.Fatalf("discovery: device_authorization_endpoint %q", provider.Endpoint().DeviceAuthURL)
	}
	conf := oauth2.Config{ClientID: clientID, Endpoint: provider.Endpoint(),
		Scopes: []string{oidc.ScopeOpenID, "profile", oidc.ScopeOfflineAccess}}
	da, err := conf.DeviceAuth(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !reUserCode.MatchString(da.UserCode) || da.VerificationURI != issuer+"/device" || da.Interval != 5 ||
		da.VerificationURIComplete != issuer+"/device?user_code="+da.UserCode || time.Until(da.Expiry) < 9*time.Minute {
		t.Fatalf("device authorization response %+v", da)
	}

	// Before approval: pending, then slow_down for a poll sooner than the
	// interval.
	poll := func() (int, map[string]any) {
		return postForm(t, edge.base+"/oauth/v2/token", url.Values{"grant_type": {"urn:ietf:params:oauth:grant-type:device_code"},
			"device_code": {da.DeviceCode}, "client_id": {clientID}})
	}
	if st, res := poll(); st != 400 || res["error"] != "authorization_pending" {
		t.Fatalf("first poll: %d %v", st, res)
	}
	if st, res := poll(); st != 400 || res["error"] != "slow_down" {
		t.Fatalf("fast poll: %d %v", st, res)
	}
	// Another client cannot redeem it.
	if st, res := postForm(t, edge.base+"/oauth/v2/token", url.Values{"grant_type": {"urn:ietf:params:oauth:grant-type:device_code"},
		"device_code": {da.DeviceCode}, "client_id": {"unknown-client"}}); st != 401 && st != 400 || res["error"] != "invalid_client" {
		t.Fatalf("unknown client: %d %v", st, res)
	}

	c := browser(t, issuer)
	// A wrong code: the same page again, with an error, and nothing else.
	res := enterUserCode(t, c, edge.base, issuer+"/device", "BBBB-BBBB")
	if page := body(t, res); res.StatusCode != 400 || !strings.Contains(page, "unknown, expired or was used") {
		t.Fatalf("wrong code: %d\n%s", res.StatusCode, page)
	}
	// The right code, as a person might type it: lower case, no dash.
	res = enterUserCode(t, c, edge.base, issuer+"/device", strings.ToLower(strings.ReplaceAll(da.UserCode, "-", "")))
	page := body(t, res)
	res = submit(t, c, edge.base, page, url.Values{"loginName": {"admin"}})
	page = body(t, res)
	res = submit(t, c, edge.base, page, url.Values{"password": {"Admin-Passw0rd-for-e2e"}})
	page = body(t, res)
	if !strings.Contains(page, da.UserCode) || !strings.Contains(page, "living-room-tv") || !strings.Contains(page, `value="accept"`) {
		t.Fatalf("consent page: %d\n%s", res.StatusCode, page)
	}
	res = submit(t, c, edge.base, page, url.Values{"decision": {"accept"}})
	if page = body(t, res); res.StatusCode != 200 || !strings.Contains(page, "Your device is signed in") {
		t.Fatalf("after approval: %d %s\n%s", res.StatusCode, res.Request.URL, page)
	}

	// After approval the tokens, at once (the interval only binds a
	// pending authorization).
	da.Interval = 1
	tok, err := conf.DeviceAccessToken(ctx, da)
	if err != nil {
		t.Fatal(err)
	}
	rawID, _ := tok.Extra("id_token").(string)
	idt, err := provider.Verifier(&oidc.Config{ClientID: clientID}).Verify(ctx, rawID)
	if err != nil {
		t.Fatalf("id token: %v", err)
	}
	var claims struct {
		SID string   `json:"sid"`
		AMR []string `json:"amr"`
	}
	_ = idt.Claims(&claims)
	if claims.SID == "" || len(claims.AMR) == 0 || tok.RefreshToken == "" {
		t.Fatalf("tokens: sid %q amr %v refresh %v", claims.SID, claims.AMR, tok.RefreshToken != "")
	}
	if _, err := conf.TokenSource(ctx, &oauth2.Token{RefreshToken: tok.RefreshToken}).Token(); err != nil {
		t.Fatalf("refresh: %v", err)
	}
	// Exactly once.
	if st, res := poll(); st != 400 || res["error"] != "invalid_grant" {
		t.Fatalf("second redemption: %d %v", st, res)
	}
	// The code works once at /device too.
	res = enterUserCode(t, c, edge.base, da.VerificationURIComplete, "")
	if page := body(t, res); res.StatusCode != 400 {
		t.Fatalf("used code at /device: %d\n%s", res.StatusCode, page)
	}

	// A denial: the signed-in browser goes straight to the device's
	// consent page.
	da2, err := conf.DeviceAuth(ctx)
	if err != nil {
		t.Fatal(err)
	}
	res = enterUserCode(t, c, edge.base, da2.VerificationURIComplete, "")
	page = body(t, res)
	if !strings.Contains(page, da2.UserCode) {
		t.Fatalf("consent page for a signed-in browser: %d\n%s", res.StatusCode, page)
	}
	res = submit(t, c, edge.base, page, url.Values{"decision": {"deny"}})
	if page = body(t, res); !strings.Contains(page, "The device was not signed in") {
		t.Fatalf("after denial: %d\n%s", res.StatusCode, page)
	}
	da2.Interval = 1
	_, err = conf.DeviceAccessToken(ctx, da2)
	var re *oauth2.RetrieveError
	if !errors.As(err, &re) || re.ErrorCode != "access_denied" {
		t.Fatalf("denied device: %v", err)
	}
}
