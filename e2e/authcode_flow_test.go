package e2e

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"

	"github.com/gatehouse-id/gatehouse/pkg/config"
)

var (
	reRequestID = regexp.MustCompile(`name="authRequestID" value="([^"]+)"`)
	reCSRF      = regexp.MustCompile(`name="csrf" value="([^"]+)"`)
	reAction    = regexp.MustCompile(`<form method="post" action="([^"]+)"`)
)

// browser is a cookie-keeping client that stops at redirects leaving the
// issuer, so the relying party's redirect URI is never dialed.
func browser(t *testing.T, issuer string) *http.Client {
	jar, _ := cookiejar.New(nil)
	return &http.Client{Jar: jar, CheckRedirect: func(req *http.Request, _ []*http.Request) error {
		if !strings.HasPrefix(req.URL.String(), issuer) {
			return http.ErrUseLastResponse
		}
		return nil
	}}
}

// submit posts the page's (first) form with its hidden fields plus fields.
func submit(t *testing.T, c *http.Client, base, page string, fields url.Values) *http.Response {
	t.Helper()
	rid, csrf, action := reRequestID.FindStringSubmatch(page), reCSRF.FindStringSubmatch(page), reAction.FindStringSubmatch(page)
	if rid == nil || csrf == nil || action == nil {
		t.Fatalf("no login form in page:\n%s", page)
	}
	fields.Set("authRequestID", rid[1])
	fields.Set("csrf", csrf[1])
	res, err := c.PostForm(base+action[1], fields)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func body(t *testing.T, res *http.Response) string {
	t.Helper()
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return string(b)
}

// TestAuthorizationCodeFlow signs a user in through the real login pages of
// the embedded server, with golang.org/x/oauth2 and go-oidc as the relying
// party: code exchange, ID token verification, userinfo, refresh rotation,
// code replay, and logout.
func TestAuthorizationCodeFlow(t *testing.T) {
	dir := t.TempDir()
	addr := freeAddr(t)
	issuer := "http://" + addr
	edge := startProc(t, config.RoleEdge, map[string]string{
		"GATEHOUSE_DATA_DIR": dir, "GATEHOUSE_ADDR": addr, "GATEHOUSE_ISSUER": issuer,
		"GATEHOUSE_ADMIN_PASSWORD": "Admin-Passw0rd-for-e2e",
		// Strict rotation: a used refresh token must fail at once (the
		// default grace for parallel refreshes is covered in tokens).
		"GATEHOUSE_REFRESH_REUSE_GRACE": "0s",
	})
	raw, err := os.ReadFile(filepath.Join(dir, "bootstrap-admin-key.json"))
	if err != nil {
		t.Fatal(err)
	}
	var kf keyFile
	_ = json.Unmarshal(raw, &kf)
	_, tok := postForm(t, edge.base+"/oauth/v2/token", url.Values{
		"grant_type": {"urn:ietf:params:oauth:grant-type:jwt-bearer"},
		"assertion":  {jwtProfileAssertion(t, kf, issuer)},
		"scope":      {"openid urn:gatehouse:iam:org:project:id:gatehouse:aud"},
	})
	admin := tok["access_token"].(string)
	_, proj := restJSON(t, "POST", edge.base+"/management/v1/projects", admin, map[string]any{"name": "Shop"})
	projectID := proj["id"].(string)
	const redirect = "http://127.0.0.1:9/cb"
	status, app := restJSON(t, "POST", edge.base+"/management/v1/projects/"+projectID+"/apps/oidc", admin, map[string]any{
		"name": "shop-web", "redirectUris": []string{redirect}, "postLogoutRedirectUris": []string{"http://127.0.0.1:9/bye"},
		"responseTypes": []string{"OIDC_RESPONSE_TYPE_CODE"},
		"grantTypes":    []string{"OIDC_GRANT_TYPE_AUTHORIZATION_CODE", "OIDC_GRANT_TYPE_REFRESH_TOKEN"},
		"appType":       "OIDC_APP_TYPE_WEB", "authMethodType": "OIDC_AUTH_METHOD_TYPE_BASIC", "accessTokenType": "OIDC_TOKEN_TYPE_JWT",
	})
	if status != 200 {
		t.Fatalf("AddOIDCApp: %d %v", status, app)
	}
	ctx := context.Background()
	provider, err := oidc.NewProvider(ctx, issuer)
	if err != nil {
		t.Fatal(err)
	}
	conf := oauth2.Config{
		ClientID: app["clientId"].(string), ClientSecret: app["clientSecret"].(string), Endpoint: provider.Endpoint(),
		RedirectURL: redirect, Scopes: []string{oidc.ScopeOpenID, "profile", "email", oidc.ScopeOfflineAccess},
	}
	verifier := provider.Verifier(&oidc.Config{ClientID: conf.ClientID})

	c := browser(t, issuer)
	nonce := fmt.Sprint(time.Now().UnixNano())
	res, err := c.Get(conf.AuthCodeURL("st-123", oidc.Nonce(nonce)))
	if err != nil {
		t.Fatal(err)
	}
	page := body(t, res)
	res = submit(t, c, edge.base, page, url.Values{"loginName": {"admin"}})
	page = body(t, res)
	res = submit(t, c, edge.base, page, url.Values{"password": {"Admin-Passw0rd-for-e2e"}})
	if res.StatusCode != http.StatusFound && res.StatusCode != http.StatusSeeOther {
		t.Fatalf("after password: %d\n%s", res.StatusCode, body(t, res))
	}
	loc, _ := url.Parse(res.Header.Get("Location"))
	res.Body.Close()
	if !strings.HasPrefix(loc.String(), redirect) || loc.Query().Get("state") != "st-123" || loc.Query().Get("code") == "" {
		t.Fatalf("redirect %s; want %s with code and state", loc, redirect)
	}
	code := loc.Query().Get("code")

	t1, err := conf.Exchange(ctx, code)
	if err != nil {
		t.Fatalf("code exchange: %v", err)
	}
	rawID, _ := t1.Extra("id_token").(string)
	idt, err := verifier.Verify(ctx, rawID)
	if err != nil || idt.Nonce != nonce {
		t.Fatalf("id_token: %v (nonce %q)", err, idt)
	}
	var claims struct {
		AuthTime int64    `json:"auth_time"`
		AMR      []string `json:"amr"`
		Email    string   `json:"email"`
	}
	_ = idt.Claims(&claims)
	if claims.AuthTime == 0 || len(claims.AMR) == 0 || claims.Email != "" {
		t.Fatalf("id_token claims %+v; want auth_time, amr, and no email beside an access token", claims)
	}
	if err := idt.VerifyAccessToken(t1.AccessToken); err != nil {
		t.Fatalf("at_hash: %v", err)
	}
	// The JWT access token is RFC 9068's: typ at+jwt and its claims.
	if hdr, claims := jwtParts(t, t1.AccessToken); hdr["typ"] != "at+jwt" || claims["iss"] != edge.base || claims["sub"] != idt.Subject ||
		claims["client_id"] != conf.ClientID || claims["jti"] == nil || claims["iat"] == nil || claims["exp"] == nil ||
		claims["aud"] == nil || claims["scope"] == nil {
		t.Fatalf("access token header %v claims %v; want RFC 9068's", hdr, claims)
	}
	if t1.RefreshToken == "" {
		t.Fatal("no refresh token despite offline_access")
	}
	ui, err := provider.UserInfo(ctx, oauth2.StaticTokenSource(t1))
	if err != nil || ui.Email == "" || ui.Subject != idt.Subject {
		t.Fatalf("userinfo: %v %v", ui, err)
	}

	// A replayed code fails and revokes what the first use issued.
	if _, err := conf.Exchange(ctx, code); err == nil || !strings.Contains(err.Error(), "invalid_grant") {
		t.Fatalf("code replay: %v; want invalid_grant", err)
	}
	if _, err := provider.UserInfo(ctx, oauth2.StaticTokenSource(t1)); err == nil {
		t.Fatal("access token still valid after the code was replayed")
	}

	// A fresh login (the session is reused: no pages) and refresh rotation.
	res, err = c.Get(conf.AuthCodeURL("st-2", oidc.Nonce("n2")))
	if err != nil {
		t.Fatal(err)
	}
	loc, _ = url.Parse(res.Header.Get("Location"))
	res.Body.Close()
	t2, err := conf.Exchange(ctx, loc.Query().Get("code"))
	if err != nil {
		t.Fatalf("second login (silent, existing session): %v (redirect %s)", err, loc)
	}
	expired := &oauth2.Token{RefreshToken: t2.RefreshToken, Expiry: time.Now().Add(-time.Hour)}
	t3, err := conf.TokenSource(ctx, expired).Token()
	if err != nil || t3.RefreshToken == "" || t3.RefreshToken == t2.RefreshToken {
		t.Fatalf("refresh: %v (rotated %v)", err, t3)
	}
	if _, err := conf.TokenSource(ctx, expired).Token(); err == nil {
		t.Fatal("a used refresh token worked again")
	}

	// RFC 7009: revoking the refresh token revokes its access token too;
	// the answer is 200 either way.
	rv := url.Values{"token": {t3.RefreshToken}, "token_type_hint": {"refresh_token"}}
	req, _ := http.NewRequest("POST", edge.base+"/oauth/v2/revoke", strings.NewReader(rv.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.SetBasicAuth(url.QueryEscape(conf.ClientID), url.QueryEscape(conf.ClientSecret))
	rres, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	rres.Body.Close()
	if rres.StatusCode != 200 {
		t.Fatalf("revoke: %d", rres.StatusCode)
	}
	if _, err := provider.UserInfo(ctx, oauth2.StaticTokenSource(t3)); err == nil {
		t.Fatal("access token of a revoked refresh token still works at userinfo")
	}
	if _, err := conf.TokenSource(ctx, &oauth2.Token{RefreshToken: t3.RefreshToken, Expiry: time.Now().Add(-time.Hour)}).Token(); err == nil {
		t.Fatal("revoked refresh token still refreshes")
	}

	// Logout ends the session: prompt=none then answers login_required.
	id3, _ := t3.Extra("id_token").(string)
	lo, err := c.Get(edge.base + "/oidc/v1/end_session?" + url.Values{"id_token_hint": {id3}, "post_logout_redirect_uri": {"http://127.0.0.1:9/bye"}, "state": {"bye"}}.Encode())
	if err != nil {
		t.Fatal(err)
	}
	lo.Body.Close()
	if l := lo.Header.Get("Location"); l != "http://127.0.0.1:9/bye?state=bye" {
		t.Fatalf("logout redirect %q", l)
	}
	res, err = c.Get(conf.AuthCodeURL("st-3", oidc.Nonce("n3"), oauth2.SetAuthURLParam("prompt", "none")))
	if err != nil {
		t.Fatal(err)
	}
	loc, _ = url.Parse(res.Header.Get("Location"))
	res.Body.Close()
	if loc.Query().Get("error") != "login_required" {
		t.Fatalf("prompt=none after logout: %s", loc)
	}
}

// jwtParts decodes a compact JWT's header and claims (unverified).
func jwtParts(t *testing.T, raw string) (header, claims map[string]any) {
	t.Helper()
	parts := strings.Split(raw, ".")
	if len(parts) != 3 {
		t.Fatalf("not a compact JWT: %q", raw)
	}
	for i, dst := range []*map[string]any{&header, &claims} {
		b, err := base64.RawURLEncoding.DecodeString(parts[i])
		if err != nil || json.Unmarshal(b, dst) != nil {
			t.Fatalf("part %d of the JWT: %v", i, err)
		}
	}
	return header, claims
}
