package e2e

import (
	"context"
	"encoding/json"
	"html"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"

	"github.com/gatehouse-id/gatehouse/pkg/config"
)

// The authn flows through the real embedded server: the login pages are
// driven by a cookie-jar browser, and every ID token is verified by go-oidc.

const (
	afRedirect   = "http://127.0.0.1:9/cb"
	afLogoutURI  = "http://127.0.0.1:9/bye"
	afImplicitCB = "http://127.0.0.1:9/implicit"
	afPassword   = "Alice-Passw0rd!"
	afBobPass    = "Bob-Passw0rd!"
)

var (
	afHiddenRE = regexp.MustCompile(`<input type="hidden" name="([^"]+)" value="([^"]*)">`)
	afActionRE = regexp.MustCompile(`<form method="post" action="([^"]+)"`)
)

// afEnv is one embedded server with a project holding a code-flow web app,
// an implicit app and an API app (for introspection), and two users.
type afEnv struct {
	t          *testing.T
	ctx        context.Context
	base       string
	dataDir    string // the embedded server's SQLite files
	admin      string
	projectID  string
	web        oauth2.Config
	provider   *oidc.Provider
	verifier   *oidc.IDTokenVerifier
	implicitID string
	webAppID   string
	apiID      string
	apiSecret  string
	users      map[string]string // user name -> id
}

func afStart(t *testing.T) *afEnv { return afStartEnv(t, nil) }

// afStartEnv is afStart with more environment variables.
func afStartEnv(t *testing.T, extra map[string]string) *afEnv {
	t.Helper()
	dir := t.TempDir()
	addr := freeAddr(t)
	issuer := "http://" + addr
	env := map[string]string{
		"GATEHOUSE_DATA_DIR": dir, "GATEHOUSE_ADDR": addr, "GATEHOUSE_ISSUER": issuer,
		"GATEHOUSE_ADMIN_PASSWORD": "Admin-Passw0rd-for-e2e",
	}
	for k, v := range extra {
		env[k] = v
	}
	edge := startProc(t, config.RoleEdge, env)
	return afSetup(t, edge.base, dir)
}

// afSetup prepares the apps and users of the flows on a running
// deployment at base (its issuer), whose directory keeps its files in
// dataDir.
func afSetup(t *testing.T, base, dataDir string) *afEnv {
	t.Helper()
	_, tok := operatorToken(t, base, dataDir, base)
	e := &afEnv{t: t, ctx: context.Background(), base: base, dataDir: dataDir, users: map[string]string{}}
	e.admin, _ = tok["access_token"].(string)
	_, proj := restJSON(t, "POST", e.base+"/management/v1/projects", e.admin, map[string]any{"name": "Flows"})
	e.projectID = proj["id"].(string)
	web := e.app(map[string]any{
		"name": "flows-web", "redirectUris": []string{afRedirect}, "postLogoutRedirectUris": []string{afLogoutURI},
		"responseTypes": []string{"OIDC_RESPONSE_TYPE_CODE"},
		"grantTypes":    []string{"OIDC_GRANT_TYPE_AUTHORIZATION_CODE", "OIDC_GRANT_TYPE_REFRESH_TOKEN"},
		"appType":       "OIDC_APP_TYPE_WEB", "authMethodType": "OIDC_AUTH_METHOD_TYPE_BASIC", "accessTokenType": "OIDC_TOKEN_TYPE_BEARER",
	})
	imp := e.app(map[string]any{
		"name": "flows-implicit", "redirectUris": []string{afImplicitCB},
		"responseTypes": []string{"OIDC_RESPONSE_TYPE_ID_TOKEN", "OIDC_RESPONSE_TYPE_ID_TOKEN_TOKEN"},
		"grantTypes":    []string{"OIDC_GRANT_TYPE_IMPLICIT"},
		"appType":       "OIDC_APP_TYPE_USER_AGENT", "authMethodType": "OIDC_AUTH_METHOD_TYPE_NONE",
	})
	e.implicitID = imp["clientId"].(string)
	e.webAppID = web["appId"].(string)
	status, api := restJSON(t, "POST", e.base+"/management/v1/projects/"+e.projectID+"/apps/api", e.admin,
		map[string]any{"name": "flows-api", "authMethodType": "API_AUTH_METHOD_TYPE_BASIC"})
	if status != 200 {
		t.Fatalf("AddAPIApp: %d %v", status, api)
	}
	e.apiID, e.apiSecret = api["clientId"].(string), api["clientSecret"].(string)

	var err error
	if e.provider, err = oidc.NewProvider(e.ctx, base); err != nil {
		t.Fatal(err)
	}
	e.web = oauth2.Config{
		ClientID: web["clientId"].(string), ClientSecret: web["clientSecret"].(string), Endpoint: e.provider.Endpoint(),
		RedirectURL: afRedirect, Scopes: []string{oidc.ScopeOpenID, "profile"},
	}
	e.verifier = e.provider.Verifier(&oidc.Config{ClientID: e.web.ClientID})
	e.user("alice", afPassword, false)
	e.user("bob", afBobPass, false)
	return e
}

func (e *afEnv) app(body map[string]any) map[string]any {
	e.t.Helper()
	status, app := restJSON(e.t, "POST", e.base+"/management/v1/projects/"+e.projectID+"/apps/oidc", e.admin, body)
	if status != 200 {
		e.t.Fatalf("AddOIDCApp %v: %d %v", body["name"], status, app)
	}
	return app
}

// user creates a human user; with initial the password must be changed at
// the first login. Otherwise the user is imported with the password (an
// admin's password reset would end sessions and revoke tokens issued in
// the same second, see RevokeUserTokens).
func (e *afEnv) user(name, password string, initial bool) string {
	e.t.Helper()
	body := map[string]any{"userName": name, "profile": map[string]any{"firstName": name, "lastName": "Flows"},
		"email": map[string]any{"email": name + "@example.com", "isEmailVerified": true}}
	path := "/management/v1/users/human/_import"
	if initial {
		body["initialPassword"] = password
		path = "/management/v1/users/human"
	} else {
		body["password"] = password
	}
	status, u := restJSON(e.t, "POST", e.base+path, e.admin, body)
	if status != 200 {
		e.t.Fatalf("add user %s: %d %v", name, status, u)
	}
	id := u["userId"].(string)
	e.users[name] = id
	return id
}

// afPage is a response read to its end.
type afPage struct {
	status int
	loc    *url.URL // the Location header, nil without one
	body   string
}

// afDo sends req through the browser, following redirects inside the
// issuer only (browser stops at the relying party).
func afDo(t *testing.T, c *http.Client, req *http.Request) afPage {
	t.Helper()
	res, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", req.Method, req.URL, err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	p := afPage{status: res.StatusCode, body: string(b)}
	if l := res.Header.Get("Location"); l != "" {
		if p.loc, err = url.Parse(l); err != nil {
			t.Fatal(err)
		}
	}
	return p
}

func afGet(t *testing.T, c *http.Client, u string, header ...string) afPage {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	return afDo(t, c, req)
}

// afSubmit posts the page's first form: its hidden fields plus fields.
func afSubmit(t *testing.T, c *http.Client, base string, p afPage, fields url.Values, header ...string) afPage {
	t.Helper()
	m := afActionRE.FindStringSubmatch(p.body)
	if m == nil {
		t.Fatalf("no form on the page (status %d):\n%s", p.status, p.body)
	}
	form := url.Values{}
	for _, h := range afHiddenRE.FindAllStringSubmatch(p.body, -1) {
		form.Set(h[1], html.UnescapeString(h[2]))
	}
	for k, v := range fields {
		form[k] = v
	}
	req, err := http.NewRequest(http.MethodPost, base+html.UnescapeString(m[1]), strings.NewReader(form.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	return afDo(t, c, req)
}

// afIs reports whether p is the page with the given form field.
func afIs(p afPage, field string) bool { return strings.Contains(p.body, `name="`+field+`"`) }

// authURL is the web app's authorization URL with extra parameters.
func (e *afEnv) authURL(state, nonce string, extra ...string) string {
	opts := []oauth2.AuthCodeOption{oidc.Nonce(nonce)}
	for i := 0; i+1 < len(extra); i += 2 {
		opts = append(opts, oauth2.SetAuthURLParam(extra[i], extra[i+1]))
	}
	return e.web.AuthCodeURL(state, opts...)
}

// password signs in from the login name page and returns the final page.
func (e *afEnv) password(c *http.Client, p afPage, loginName, password string, header ...string) afPage {
	e.t.Helper()
	if !afIs(p, "loginName") {
		e.t.Fatalf("want the login name page; got %d:\n%s", p.status, p.body)
	}
	p = afSubmit(e.t, c, e.base, p, url.Values{"loginName": {loginName}}, header...)
	if !afIs(p, "password") {
		e.t.Fatalf("want the password page; got %d:\n%s", p.status, p.body)
	}
	return afSubmit(e.t, c, e.base, p, url.Values{"password": {password}}, header...)
}

// afIDClaims are the ID token claims the flows check.
type afIDClaims struct {
	AuthTime int64    `json:"auth_time"`
	AMR      []string `json:"amr"`
	SID      string   `json:"sid"`
	AZP      string   `json:"azp"`
	AtHash   string   `json:"at_hash"`
}

// afIDToken is a verified ID token with its claims and the access token.
type afIDToken struct {
	*oidc.IDToken
	claims afIDClaims
	raw    string
	access string
}

// code checks the code redirect p (state), exchanges the code and
// verifies the ID token (signature, audience, nonce, auth_time, sid, amr).
func (e *afEnv) code(p afPage, state, nonce string) afIDToken {
	e.t.Helper()
	if p.loc == nil || !strings.HasPrefix(p.loc.String(), afRedirect) {
		e.t.Fatalf("want a redirect to %s; got %d %v:\n%s", afRedirect, p.status, p.loc, p.body)
	}
	q := p.loc.Query()
	if q.Get("error") != "" || q.Get("code") == "" || q.Get("state") != state {
		e.t.Fatalf("redirect %s; want a code and state %q", p.loc, state)
	}
	tok, err := e.web.Exchange(e.ctx, q.Get("code"))
	if err != nil {
		e.t.Fatalf("code exchange: %v", err)
	}
	raw, _ := tok.Extra("id_token").(string)
	it := e.verify(raw, nonce)
	it.access = tok.AccessToken
	if err := it.VerifyAccessToken(tok.AccessToken); err != nil {
		e.t.Errorf("at_hash: %v", err)
	}
	return it
}

func (e *afEnv) verify(raw, nonce string) afIDToken {
	e.t.Helper()
	idt, err := e.verifier.Verify(e.ctx, raw)
	if err != nil {
		e.t.Fatalf("verify id_token: %v", err)
	}
	it := afIDToken{IDToken: idt, raw: raw}
	if err := idt.Claims(&it.claims); err != nil {
		e.t.Fatal(err)
	}
	if idt.Nonce != nonce {
		e.t.Errorf("nonce %q; want %q", idt.Nonce, nonce)
	}
	// pwd for a password, fed for a federated sign-in (the provider's own
	// values only beside it, for a trusted provider), swk and user for a
	// passkey.
	first := it.claims.AMR
	if it.claims.AuthTime == 0 || it.claims.SID == "" || !slices.Contains(first, "pwd") && (len(first) == 0 || first[0] != "fed") &&
		!(slices.Contains(first, "swk") && slices.Contains(first, "user")) {
		e.t.Errorf("claims %+v; want auth_time, sid and amr [pwd], [fed …] or [swk user …]", it.claims)
	}
	return it
}

// errorRedirect checks an error redirect to base, in the query or fragment.
func afErrorRedirect(t *testing.T, p afPage, base, code, state string, fragment bool) {
	t.Helper()
	if p.loc == nil || !strings.HasPrefix(p.loc.String(), base) {
		t.Fatalf("status %d Location %v; want a redirect to %s with %s:\n%s", p.status, p.loc, base, code, p.body)
	}
	q := p.loc.Query()
	if fragment {
		if p.loc.RawQuery != "" {
			t.Errorf("query %q; want the error in the fragment", p.loc.RawQuery)
		}
		q, _ = url.ParseQuery(p.loc.Fragment)
	}
	if q.Get("error") != code || q.Get("state") != state || q.Get("error_description") == "" {
		t.Errorf("redirect %s; want error %s with state %q and a description", p.loc, code, state)
	}
}

// introspect reports whether the API app sees token as active.
func (e *afEnv) active(token string) bool {
	e.t.Helper()
	return e.introspection(token)["active"] == true
}

// introspection returns the API app's view of token.
func (e *afEnv) introspection(token string) map[string]any {
	e.t.Helper()
	req, _ := http.NewRequest("POST", e.base+"/oauth/v2/introspect", strings.NewReader(url.Values{"token": {token}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.SetBasicAuth(url.QueryEscape(e.apiID), url.QueryEscape(e.apiSecret))
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer res.Body.Close()
	var m map[string]any
	_ = json.NewDecoder(res.Body).Decode(&m)
	if res.StatusCode != 200 {
		e.t.Fatalf("introspect: %d %v", res.StatusCode, m)
	}
	return m
}

// with returns e reporting to t (a subtest).
func (e *afEnv) with(t *testing.T) *afEnv {
	c := *e
	c.t = t
	return &c
}

// addAccount signs another user in on a browser that holds a session,
// through select_account and "sign in with another account".
func (e *afEnv) addAccount(c *http.Client, user, password, state string) afIDToken {
	e.t.Helper()
	p := afGet(e.t, c, e.authURL(state, "n-"+state, "prompt", "select_account"))
	rid := regexp.MustCompile(`authRequestID=([^"&]+)&amp;other=1`).FindStringSubmatch(p.body)
	if rid == nil {
		e.t.Fatalf("no other-account link on the select page (%d):\n%s", p.status, p.body)
	}
	p = afGet(e.t, c, e.base+"/ui/login/login?authRequestID="+rid[1]+"&other=1")
	return e.code(e.password(c, p, user, password), state, "n-"+state)
}

// signIn runs a full code flow for user in browser c.
func (e *afEnv) signIn(c *http.Client, user, password, state string) afIDToken {
	e.t.Helper()
	p := afGet(e.t, c, e.authURL(state, "n-"+state))
	return e.code(e.password(c, p, user, password), state, "n-"+state)
}

// promptNone expects prompt=none to answer with error code (or a code
// for user when code is "").
func (e *afEnv) promptNone(c *http.Client, code string, extra ...string) afPage {
	e.t.Helper()
	p := afGet(e.t, c, e.authURL("pn", "n-pn", append([]string{"prompt", "none"}, extra...)...))
	if code != "" {
		afErrorRedirect(e.t, p, afRedirect, code, "pn", false)
	}
	return p
}

func TestAuthnPromptsAndHints(t *testing.T) {
	e := afStart(t)

	t.Run("prompt=none", func(t *testing.T) {
		e := e.with(t)
		c := browser(t, e.base)
		e.promptNone(c, "login_required")
		first := e.signIn(c, "alice", afPassword, "s1")
		if first.Subject != e.users["alice"] {
			t.Fatalf("sub %s; want alice %s", first.Subject, e.users["alice"])
		}
		it := e.code(e.promptNone(c, ""), "pn", "n-pn")
		if it.Subject != first.Subject || it.claims.SID != first.claims.SID || it.claims.AuthTime != first.claims.AuthTime {
			t.Errorf("silent login: sub %s sid %s auth_time %d; want the session's %s %s %d",
				it.Subject, it.claims.SID, it.claims.AuthTime, first.Subject, first.claims.SID, first.claims.AuthTime)
		}
	})

	t.Run("prompt=login and max_age", func(t *testing.T) {
		e := e.with(t)
		c := browser(t, e.base)
		first := e.signIn(c, "alice", afPassword, "s1")
		time.Sleep(1100 * time.Millisecond) // auth_time has second resolution
		// A large max_age reuses the session without a page.
		it := e.code(afGet(t, c, e.authURL("ma", "n-ma", "max_age", "3600")), "ma", "n-ma")
		if it.claims.AuthTime != first.claims.AuthTime {
			t.Errorf("max_age=3600: auth_time %d; want the session's %d", it.claims.AuthTime, first.claims.AuthTime)
		}
		// prompt=login asks for the password again; auth_time advances.
		p := afGet(t, c, e.authURL("pl", "n-pl", "prompt", "login"))
		if !afIs(p, "password") && !afIs(p, "loginName") {
			t.Fatalf("prompt=login: want a login page; got %d %v:\n%s", p.status, p.loc, p.body)
		}
		if afIs(p, "loginName") {
			p = afSubmit(t, c, e.base, p, url.Values{"loginName": {"alice"}})
		}
		second := e.code(afSubmit(t, c, e.base, p, url.Values{"password": {afPassword}}), "pl", "n-pl")
		if second.claims.AuthTime <= first.claims.AuthTime {
			t.Errorf("prompt=login: auth_time %d; want after %d", second.claims.AuthTime, first.claims.AuthTime)
		}
		time.Sleep(1100 * time.Millisecond)
		// max_age=0 forces a new login as well.
		p = afGet(t, c, e.authURL("m0", "n-m0", "max_age", "0"))
		if p.loc != nil {
			t.Fatalf("max_age=0: redirect %s; want a login page", p.loc)
		}
		if afIs(p, "loginName") {
			p = afSubmit(t, c, e.base, p, url.Values{"loginName": {"alice"}})
		}
		third := e.code(afSubmit(t, c, e.base, p, url.Values{"password": {afPassword}}), "m0", "n-m0")
		if third.claims.AuthTime <= second.claims.AuthTime {
			t.Errorf("max_age=0: auth_time %d; want after %d", third.claims.AuthTime, second.claims.AuthTime)
		}
	})

	t.Run("select_account with two users", func(t *testing.T) {
		e := e.with(t)
		c := browser(t, e.base)
		alice := e.signIn(c, "alice", afPassword, "s1")
		p := afGet(t, c, e.authURL("sa", "n-sa", "prompt", "select_account"))
		if !afIs(p, "sessionID") || !strings.Contains(p.body, "alice") {
			t.Fatalf("want the select page listing alice; got %d %v:\n%s", p.status, p.loc, p.body)
		}
		bob := e.addAccount(c, "bob", afBobPass, "sa")
		if bob.Subject != e.users["bob"] || bob.claims.SID == alice.claims.SID {
			t.Fatalf("other account: sub %s sid %s; want bob %s in a new session", bob.Subject, bob.claims.SID, e.users["bob"])
		}
		for _, who := range []afIDToken{alice, bob} {
			p := afGet(t, c, e.authURL("sb", "n-sb", "prompt", "select_account"))
			buttons := regexp.MustCompile(`name="sessionID" value="([^"]+)"`).FindAllStringSubmatch(p.body, -1)
			if len(buttons) != 2 || !strings.Contains(p.body, "alice") || !strings.Contains(p.body, "bob") {
				t.Fatalf("select page lists %d sessions; want alice and bob:\n%s", len(buttons), p.body)
			}
			var pick afPage
			for _, b := range buttons {
				if b[1] == who.claims.SID {
					pick = afSubmit(t, c, e.base, p, url.Values{"sessionID": {b[1]}})
				}
			}
			if pick.loc == nil {
				// The page's session ids are the ID tokens' sid.
				t.Fatalf("no button for session %s in %v", who.claims.SID, buttons)
			}
			if it := e.code(pick, "sb", "n-sb"); it.Subject != who.Subject {
				t.Errorf("chose %s; got sub %s", who.Subject, it.Subject)
			}
		}
	})

	t.Run("login_hint and id_token_hint", func(t *testing.T) {
		e := e.with(t)
		c := browser(t, e.base)
		p := afGet(t, c, e.authURL("lh", "n-lh", "login_hint", "bob"))
		if !strings.Contains(p.body, `name="loginName" type="text" value="bob"`) && !regexp.MustCompile(`name="loginName"[^>]*value="bob"`).MatchString(p.body) {
			t.Fatalf("login_hint: the login name is not pre-filled:\n%s", p.body)
		}
		alice := e.signIn(c, "alice", afPassword, "s1")
		bob := e.addAccount(c, "bob", afBobPass, "s2")
		// With two sessions the hint picks alice's silently.
		it := e.code(e.promptNone(c, "", "id_token_hint", alice.raw), "pn", "n-pn")
		if it.Subject != alice.Subject {
			t.Errorf("id_token_hint of alice: sub %s", it.Subject)
		}
		it = e.code(e.promptNone(c, "", "id_token_hint", bob.raw), "pn", "n-pn")
		if it.Subject != bob.Subject {
			t.Errorf("id_token_hint of bob: sub %s", it.Subject)
		}
		// A hint that is not an ID token of this issuer is an error.
		forged := bob.raw[:len(bob.raw)-4] + "AAAA"
		p = afGet(t, c, e.authURL("bad", "n-bad", "id_token_hint", forged))
		afErrorRedirect(t, p, afRedirect, "invalid_request", "bad", false)
	})

	t.Run("ui_locales and Accept-Language", func(t *testing.T) {
		e := e.with(t)
		c := browser(t, e.base)
		p := afGet(t, c, e.authURL("de", "n-de", "ui_locales", "de"))
		if !strings.Contains(p.body, `<html lang="de">`) || !strings.Contains(p.body, "Loginname") {
			t.Errorf("ui_locales=de: want the German login page:\n%s", p.body)
		}
		p = afGet(t, c, e.authURL("al", "n-al"), "Accept-Language", "de-DE,de;q=0.9,en;q=0.5")
		if !strings.Contains(p.body, `<html lang="de">`) || !strings.Contains(p.body, "Weiter") {
			t.Errorf("Accept-Language de: want the German login page:\n%s", p.body)
		}
		p = afGet(t, c, e.authURL("en", "n-en"))
		if !strings.Contains(p.body, `<html lang="en">`) || !strings.Contains(p.body, "Login name") {
			t.Errorf("no language: want the English login page:\n%s", p.body)
		}
	})

	t.Run("prompt=create", func(t *testing.T) {
		e := e.with(t)
		// Registration is off by default: the organization's login policy
		// allows it.
		if status, m := restJSON(t, "POST", e.base+"/management/v1/policies/login", e.admin,
			map[string]any{"allowUsernamePassword": true, "allowRegister": true, "ignoreUnknownUsernames": true}); status != 200 {
			t.Fatalf("AddCustomLoginPolicy: %d %v", status, m)
		}
		c := browser(t, e.base)
		p := afGet(t, c, e.authURL("cr", "n-cr", "prompt", "create"))
		if !afIs(p, "userName") || !afIs(p, "confirmPassword") {
			t.Fatalf("prompt=create: want the registration form; got %d:\n%s", p.status, p.body)
		}
		weak := afSubmit(t, c, e.base, p, url.Values{"userName": {"carol"}, "firstName": {"Carol"}, "lastName": {"New"},
			"email": {"carol@example.com"}, "password": {"abc"}, "confirmPassword": {"abc"}})
		if weak.status != http.StatusBadRequest || !strings.Contains(weak.body, "does not meet the password policy") {
			t.Fatalf("weak password: status %d; want the policy error:\n%s", weak.status, weak.body)
		}
		done := afSubmit(t, c, e.base, weak, url.Values{"userName": {"carol"}, "firstName": {"Carol"}, "lastName": {"New"},
			"email": {"carol@example.com"}, "password": {"Carol-Passw0rd!"}, "confirmPassword": {"Carol-Passw0rd!"}})
		carol := e.code(done, "cr", "n-cr")
		// The new user signs in on another browser.
		if again := e.signIn(browser(t, e.base), "carol", "Carol-Passw0rd!", "c2"); again.Subject != carol.Subject {
			t.Errorf("carol signs in as %s; registered as %s", again.Subject, carol.Subject)
		}
	})
}

func TestAuthnPasswordChangeAndLockout(t *testing.T) {
	// Edge takes the client address from X-Forwarded-For, so the test
	// can sign in from several addresses.
	e := afStartEnv(t, map[string]string{"GATEHOUSE_TRUSTED_PROXIES": "127.0.0.1/32,::1/128"})

	t.Run("forced password change", func(t *testing.T) {
		e := e.with(t)
		e.user("dave", "Initial-Passw0rd!", true)
		c := browser(t, e.base)
		p := e.password(c, afGet(t, c, e.authURL("ch", "n-ch")), "dave", "Initial-Passw0rd!")
		if !afIs(p, "newPassword") {
			t.Fatalf("want the change page; got %d %v:\n%s", p.status, p.loc, p.body)
		}
		p = afSubmit(t, c, e.base, p, url.Values{"currentPassword": {"Initial-Passw0rd!"}, "newPassword": {"Dave-Changed-1!"}, "confirmPassword": {"Dave-Changed-1!"}})
		dave := e.code(p, "ch", "n-ch")
		if dave.Subject != e.users["dave"] {
			t.Errorf("sub %s; want dave", dave.Subject)
		}
		c = browser(t, e.base)
		p = e.password(c, afGet(t, c, e.authURL("old", "n-old")), "dave", "Initial-Passw0rd!")
		if p.loc != nil || !strings.Contains(p.body, "wrong") {
			t.Errorf("old password: %d %v; want the credentials error", p.status, p.loc)
		}
		if it := e.code(afSubmit(t, c, e.base, p, url.Values{"password": {"Dave-Changed-1!"}}), "old", "n-old"); it.Subject != dave.Subject {
			t.Errorf("new password signs in %s", it.Subject)
		}
	})

	// After 3 failures of one (name, address) pair each attempt waits 1 s,
	// 2 s, 4 s …; one before then is refused even with the right password.
	// Every refusal is the wrong-password page: the same status and, but
	// for the typed name and the per-request tokens, the same bytes, for a
	// known and an unknown name alike. Another address is not slowed down.
	t.Run("failed passwords look alike and slow down", func(t *testing.T) {
		e := e.with(t)
		e.user("erin", "Erin-Passw0rd!", false)
		const here, elsewhere = "203.0.113.10", "203.0.113.20"
		attempt := func(c *http.Client, p afPage, name, password, from string) afPage {
			t.Helper()
			if !afIs(p, "password") {
				p = afSubmit(t, c, e.base, afGet(t, c, e.authURL("lo", "n-lo"), "X-Forwarded-For", from), url.Values{"loginName": {name}}, "X-Forwarded-For", from)
			}
			return afSubmit(t, c, e.base, p, url.Values{"password": {password}}, "X-Forwarded-For", from)
		}
		var pages []afPage
		var names []string
		for _, name := range []string{"erin", "nobody-here"} {
			c := browser(t, e.base)
			var p afPage
			for i := range 3 {
				p = attempt(c, p, name, "wrong-"+string(rune('0'+i)), here)
				pages, names = append(pages, p), append(names, name)
			}
			// Too early: refused, even with erin's password.
			p = attempt(c, p, name, "Erin-Passw0rd!", here)
			pages, names = append(pages, p), append(names, name)
		}
		want := afAnonymous(pages[0], names[0])
		if pages[0].status != http.StatusUnauthorized || !strings.Contains(pages[0].body, "wrong") {
			t.Fatalf("wrong password: status %d; want 401 and the credentials error:\n%s", pages[0].status, pages[0].body)
		}
		for i, p := range pages {
			if got := afAnonymous(p, names[i]); p.status != pages[0].status || p.loc != nil || got != want {
				t.Errorf("answer %d (%s): status %d Location %v; want exactly the wrong-password page (status %d):\n%s\n--- want:\n%s",
					i, names[i], p.status, p.loc, pages[0].status, got, want)
			}
		}
		// From another address erin signs in at once.
		other := browser(t, e.base)
		p := afGet(t, other, e.authURL("el", "n-el"), "X-Forwarded-For", elsewhere)
		if it := e.code(e.password(other, p, "erin", "Erin-Passw0rd!", "X-Forwarded-For", elsewhere), "el", "n-el"); it.Subject != e.users["erin"] {
			t.Errorf("erin from another address: sub %s", it.Subject)
		}
		time.Sleep(time.Second + 100*time.Millisecond)
		c := browser(t, e.base)
		if it := e.code(attempt(c, afPage{}, "erin", "Erin-Passw0rd!", here), "lo", "n-lo"); it.Subject != e.users["erin"] {
			t.Errorf("erin after the 1 s wait: sub %s", it.Subject)
		}
	})
}

// afAnonymous is a page's body without what differs by request: the
// typed login name, the auth request id and the CSRF token.
func afAnonymous(p afPage, name string) string {
	b := afTokenRE.ReplaceAllString(p.body, "${1}TOKEN")
	return strings.ReplaceAll(b, name, "NAME")
}

var afTokenRE = regexp.MustCompile(`(authRequestID=|name="authRequestID" value="|name="csrf" value=")[^"&]*`)

func TestAuthnImplicitAndErrors(t *testing.T) {
	e := afStart(t)
	c := browser(t, e.base)
	e.signIn(c, "alice", afPassword, "s1")
	impVerifier := e.provider.Verifier(&oidc.Config{ClientID: e.implicitID})
	implicit := func(t *testing.T, rt string, extra ...string) afPage {
		q := url.Values{"client_id": {e.implicitID}, "redirect_uri": {afImplicitCB}, "response_type": {rt},
			"scope": {"openid profile"}, "state": {"im"}, "nonce": {"n-im"}}
		for i := 0; i+1 < len(extra); i += 2 {
			if extra[i+1] == "" {
				q.Del(extra[i])
			} else {
				q.Set(extra[i], extra[i+1])
			}
		}
		return afGet(t, c, e.base+"/oauth/v2/authorize?"+q.Encode())
	}

	for _, rt := range []string{"id_token", "id_token token"} {
		t.Run("implicit "+rt, func(t *testing.T) {
			e := e.with(t)
			p := implicit(t, rt)
			if p.loc == nil || !strings.HasPrefix(p.loc.String(), afImplicitCB+"#") || p.loc.RawQuery != "" {
				t.Fatalf("status %d Location %v; want the fragment response:\n%s", p.status, p.loc, p.body)
			}
			f, _ := url.ParseQuery(p.loc.Fragment)
			idt, err := impVerifier.Verify(e.ctx, f.Get("id_token"))
			if err != nil || idt.Nonce != "n-im" || f.Get("state") != "im" {
				t.Fatalf("id_token: %v (nonce %v, state %q)", err, idt, f.Get("state"))
			}
			var cl afIDClaims
			_ = idt.Claims(&cl)
			if cl.AuthTime == 0 || cl.SID == "" {
				t.Errorf("claims %+v; want auth_time and sid", cl)
			}
			if rt == "id_token" {
				if f.Get("access_token") != "" || cl.AtHash != "" {
					t.Errorf("id_token alone: fragment %v; want no access token nor at_hash", f)
				}
				return
			}
			if f.Get("access_token") == "" || !strings.EqualFold(f.Get("token_type"), "bearer") || cl.AtHash == "" {
				t.Fatalf("fragment %v, at_hash %q; want an access token and at_hash", f, cl.AtHash)
			}
			if err := idt.VerifyAccessToken(f.Get("access_token")); err != nil {
				t.Errorf("at_hash: %v", err)
			}
		})
	}
	t.Run("implicit without nonce", func(t *testing.T) {
		afErrorRedirect(t, implicit(t, "id_token", "nonce", ""), afImplicitCB, "invalid_request", "im", true)
	})
	t.Run("code for an implicit-only app", func(t *testing.T) {
		afErrorRedirect(t, implicit(t, "code", "code_challenge", "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM", "code_challenge_method", "S256"),
			afImplicitCB, "unauthorized_client", "im", false)
	})
	t.Run("unregistered redirect_uri", func(t *testing.T) {
		e := e.with(t)
		p := afGet(t, c, e.authURL("x", "n-x", "redirect_uri", "http://127.0.0.1:9/evil"))
		if p.loc != nil || p.status != http.StatusBadRequest || !strings.Contains(p.body, "invalid_request") {
			t.Errorf("status %d Location %v; want an error page on Gatehouse:\n%s", p.status, p.loc, p.body)
		}
	})
	t.Run("missing openid", func(t *testing.T) {
		e := e.with(t)
		u, _ := url.Parse(e.authURL("sc", "n-sc"))
		q := u.Query()
		q.Set("scope", "profile")
		u.RawQuery = q.Encode()
		afErrorRedirect(t, afGet(t, c, u.String()), afRedirect, "invalid_scope", "sc", false)
	})
}

func (e *afEnv) endSession(c *http.Client, v url.Values, header ...string) afPage {
	e.t.Helper()
	return afGet(e.t, c, e.base+"/oidc/v1/end_session?"+v.Encode(), header...)
}

// loggedOut checks that the browser's sessions and their tokens are gone.
func (e *afEnv) loggedOut(c *http.Client, tokens ...afIDToken) {
	e.t.Helper()
	for _, it := range tokens {
		if e.active(it.access) {
			e.t.Errorf("access token of session %s still active after logout", it.claims.SID)
		}
	}
	e.promptNone(c, "login_required")
}

func afLoggedOutPage(p afPage) bool {
	return p.status == http.StatusOK && p.loc == nil && strings.Contains(p.body, "You are signed out")
}

func TestAuthnEndSession(t *testing.T) {
	e := afStart(t)
	t.Run("hint, registered uri and state", func(t *testing.T) {
		e := e.with(t)
		c := browser(t, e.base)
		it := e.signIn(c, "alice", afPassword, "s1")
		if !e.active(it.access) {
			t.Fatal("access token inactive before logout")
		}
		p := e.endSession(c, url.Values{"id_token_hint": {it.raw}, "post_logout_redirect_uri": {afLogoutURI}, "state": {"bye 1"}})
		if p.loc == nil || p.loc.String() != afLogoutURI+"?state=bye+1" {
			t.Fatalf("status %d Location %v; want %s?state=bye+1", p.status, p.loc, afLogoutURI)
		}
		e.loggedOut(c, it)
	})
	t.Run("hint and unregistered uri", func(t *testing.T) {
		e := e.with(t)
		c := browser(t, e.base)
		it := e.signIn(c, "alice", afPassword, "s1")
		p := e.endSession(c, url.Values{"id_token_hint": {it.raw}, "post_logout_redirect_uri": {"http://127.0.0.1:9/elsewhere"}, "state": {"x"}})
		if !afLoggedOutPage(p) {
			t.Fatalf("status %d Location %v; want the logged-out page:\n%s", p.status, p.loc, p.body)
		}
		e.loggedOut(c, it)
	})
	t.Run("client_id is not the hint's azp", func(t *testing.T) {
		e := e.with(t)
		c := browser(t, e.base)
		it := e.signIn(c, "alice", afPassword, "s1")
		p := e.endSession(c, url.Values{"id_token_hint": {it.raw}, "client_id": {e.implicitID}})
		if p.status != http.StatusBadRequest || p.loc != nil || !strings.Contains(p.body, "invalid_request") {
			t.Fatalf("status %d Location %v; want an error page", p.status, p.loc)
		}
		if !e.active(it.access) {
			t.Error("a refused logout revoked the session's token")
		}
		e.code(e.promptNone(c, ""), "pn", "n-pn")
	})
	t.Run("no parameters: confirmation ends every session of the browser", func(t *testing.T) {
		e := e.with(t)
		c := browser(t, e.base)
		alice := e.signIn(c, "alice", afPassword, "s1")
		bob := e.addAccount(c, "bob", afBobPass, "sa")

		p := e.endSession(c, url.Values{})
		if p.status != http.StatusOK || p.loc != nil || !strings.Contains(p.body, `action="/oidc/v1/end_session"`) ||
			!strings.Contains(p.body, "alice") || !strings.Contains(p.body, "bob") {
			t.Fatalf("status %d Location %v; want the confirmation listing alice and bob:\n%s", p.status, p.loc, p.body)
		}
		if !e.active(alice.access) || !e.active(bob.access) {
			t.Fatal("the confirmation page alone logged out")
		}
		// A cross-site form without the browser's token is refused.
		forged := afSubmit(t, c, e.base, afPage{body: strings.Replace(p.body, `name="csrf" value="`, `name="csrf" value="x`, 1)}, url.Values{})
		if forged.status != http.StatusForbidden || !e.active(alice.access) {
			t.Fatalf("forged confirmation: status %d; want 403 and nothing ended", forged.status)
		}
		if done := afSubmit(t, c, e.base, p, url.Values{}); !afLoggedOutPage(done) {
			t.Fatalf("confirmed: status %d Location %v; want the logged-out page:\n%s", done.status, done.loc, done.body)
		}
		e.loggedOut(c, alice, bob)
	})
	t.Run("client_id and registered uri without hint", func(t *testing.T) {
		e := e.with(t)
		c := browser(t, e.base)
		it := e.signIn(c, "alice", afPassword, "s1")
		p := e.endSession(c, url.Values{"client_id": {e.web.ClientID}, "post_logout_redirect_uri": {afLogoutURI}, "state": {"st"}, "ui_locales": {"de"}})
		if !strings.Contains(p.body, "Abmelden?") || !strings.Contains(p.body, `<html lang="de">`) {
			t.Fatalf("want the German confirmation:\n%s", p.body)
		}
		done := afSubmit(t, c, e.base, p, url.Values{})
		if done.loc == nil || done.loc.String() != afLogoutURI+"?state=st" {
			t.Fatalf("status %d Location %v; want %s?state=st", done.status, done.loc, afLogoutURI)
		}
		e.loggedOut(c, it)
	})
	t.Run("uri without client and Accept-Language de", func(t *testing.T) {
		e := e.with(t)
		c := browser(t, e.base)
		it := e.signIn(c, "alice", afPassword, "s1")
		p := e.endSession(c, url.Values{"post_logout_redirect_uri": {afLogoutURI}}, "Accept-Language", "de")
		if !strings.Contains(p.body, "Möchten Sie sich") {
			t.Fatalf("want the German confirmation:\n%s", p.body)
		}
		done := afSubmit(t, c, e.base, p, url.Values{}, "Accept-Language", "de")
		if done.loc != nil || !strings.Contains(done.body, "Sie sind abgemeldet") {
			t.Fatalf("status %d Location %v; want the German logged-out page, no redirect:\n%s", done.status, done.loc, done.body)
		}
		e.loggedOut(c, it)
	})
}
