package service_test

import (
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/gatehouse-id/gatehouse/pkg/db"
	directoryv1 "github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/directory/v1"
	"github.com/gatehouse-id/gatehouse/services/authn/internal/authntest"
)

func TestAuthorizeErrorPageNeverRedirects(t *testing.T) {
	e := newEnv(t, db.SQLite)
	rows := []struct {
		name  string
		query string
	}{
		{"missing client_id", "redirect_uri=" + url.QueryEscape(webRedirect) + "&response_type=code&scope=openid"},
		{"unknown client_id", "client_id=nope&redirect_uri=" + url.QueryEscape(webRedirect) + "&response_type=code&scope=openid"},
		{"inactive client", "client_id=off&redirect_uri=" + url.QueryEscape(webRedirect) + "&response_type=code&scope=openid"},
		{"API app", "client_id=api&redirect_uri=" + url.QueryEscape(webRedirect) + "&response_type=code&scope=openid"},
		{"repeated client_id", "client_id=web&client_id=web&redirect_uri=" + url.QueryEscape(webRedirect) + "&response_type=code&scope=openid"},
		{"missing redirect_uri", "client_id=web&response_type=code&scope=openid"},
		{"unregistered redirect_uri", "client_id=web&redirect_uri=" + url.QueryEscape("https://evil.example/cb") + "&response_type=code&scope=openid"},
		{"redirect_uri prefix only", "client_id=web&redirect_uri=" + url.QueryEscape(webRedirect+"/x") + "&response_type=code&scope=openid"},
		{"redirect_uri other query", "client_id=web&redirect_uri=" + url.QueryEscape(webRedirect+"?tenant=b") + "&response_type=code&scope=openid"},
		{"repeated redirect_uri", "client_id=web&redirect_uri=" + url.QueryEscape(webRedirect) + "&redirect_uri=" + url.QueryEscape(webRedirect) + "&response_type=code&scope=openid"},
	}
	for _, row := range rows {
		t.Run(row.name, func(t *testing.T) {
			r := e.get("/oauth/v2/authorize?" + row.query)
			if r.StatusCode != http.StatusBadRequest || r.Header.Get("Location") != "" {
				t.Fatalf("status %d, Location %q; want 400 and no redirect", r.StatusCode, r.Header.Get("Location"))
			}
			if !strings.Contains(r.body, `<html lang="en">`) || !strings.Contains(r.body, "invalid_request") {
				t.Errorf("error page lacks lang or error code:\n%s", r.body)
			}
		})
	}
	t.Run("directory down", func(t *testing.T) {
		e.dir.Down = true
		defer func() { e.dir.Down = false }()
		r := e.authorize(codeParams())
		if r.StatusCode != http.StatusServiceUnavailable || r.Header.Get("Retry-After") == "" || r.Header.Get("Location") != "" {
			t.Fatalf("status %d Retry-After %q; want 503 with a retry hint", r.StatusCode, r.Header.Get("Retry-After"))
		}
	})
}

func TestAuthorizeRedirectErrors(t *testing.T) {
	e := newEnv(t, db.SQLite)
	e.tok.AddHint("expired-hint", "alice-id", "web", "s1", true)
	spa := func(extra ...string) url.Values {
		p := url.Values{"client_id": {"spa"}, "redirect_uri": {spaRedirect}, "scope": {"openid"}, "state": {"st-2"},
			"response_type": {"code"}, "code_challenge": {challenge}, "code_challenge_method": {"S256"}}
		for i := 0; i+1 < len(extra); i += 2 {
			if extra[i+1] == "" {
				p.Del(extra[i])
			} else {
				p.Set(extra[i], extra[i+1])
			}
		}
		return p
	}
	rows := []struct {
		name     string
		params   url.Values
		code     string
		state    string
		base     string
		fragment bool
	}{
		{"missing response_type", codeParams("response_type", ""), "invalid_request", "st-1", webRedirect, false},
		{"unsupported response_type token", codeParams("response_type", "token"), "unsupported_response_type", "st-1", webRedirect, false},
		{"unsupported response_type code id_token", codeParams("response_type", "code id_token"), "unsupported_response_type", "st-1", webRedirect, false},
		{"implicit not allowed for app", codeParams("response_type", "id_token"), "unauthorized_client", "st-1", webRedirect, true},
		{"missing scope", codeParams("scope", ""), "invalid_request", "st-1", webRedirect, false},
		{"scope without openid", codeParams("scope", "profile email"), "invalid_scope", "st-1", webRedirect, false},
		{"unknown org scope", codeParams("scope", "openid urn:gatehouse:iam:org:id:nope"), "invalid_scope", "st-1", webRedirect, false},
		{"inactive org scope", codeParams("scope", "openid urn:gatehouse:iam:org:id:org3"), "invalid_scope", "st-1", webRedirect, false},
		{"two org scopes", codeParams("scope", "openid urn:gatehouse:iam:org:id:org1 urn:gatehouse:iam:org:id:org2"), "invalid_scope", "st-1", webRedirect, false},
		{"PKCE missing for public client", spa("code_challenge", "", "code_challenge_method", ""), "invalid_request", "st-2", spaRedirect, false},
		{"PKCE plain", spa("code_challenge_method", "plain"), "invalid_request", "st-2", spaRedirect, false},
		{"PKCE without method", spa("code_challenge_method", ""), "invalid_request", "st-2", spaRedirect, false},
		{"PKCE method without challenge", spa("code_challenge", ""), "invalid_request", "st-2", spaRedirect, false},
		{"PKCE challenge too short", spa("code_challenge", "abc"), "invalid_request", "st-2", spaRedirect, false},
		{"implicit without nonce", spa("response_type", "id_token token", "code_challenge", "", "code_challenge_method", ""), "invalid_request", "st-2", spaRedirect, true},
		{"implicit id_token without nonce", spa("response_type", "id_token", "code_challenge", "", "code_challenge_method", ""), "invalid_request", "st-2", spaRedirect, true},
		{"prompt none with login", codeParams("prompt", "none login"), "invalid_request", "st-1", webRedirect, false},
		{"prompt none with an unknown value", codeParams("prompt", "none always"), "invalid_request", "st-1", webRedirect, false},
		{"unsupported response_mode", codeParams("response_mode", "jwt"), "invalid_request", "st-1", webRedirect, false},
		{"response_mode fragment is honoured", codeParams("response_mode", "fragment", "scope", "email"), "invalid_scope", "st-1", webRedirect, true},
		{"response_mode query for tokens", spa("response_type", "id_token token", "code_challenge", "", "code_challenge_method", "", "nonce", "n", "response_mode", "query"), "invalid_request", "st-2", spaRedirect, true},
		{"ZITADEL's scope", codeParams("scope", "openid urn:zitadel:iam:org:project:id:zitadel:aud"), "invalid_scope", "st-1", webRedirect, false},
		{"negative max_age", codeParams("max_age", "-1"), "invalid_request", "st-1", webRedirect, false},
		{"non-numeric max_age", codeParams("max_age", "soon"), "invalid_request", "st-1", webRedirect, false},
		{"invalid id_token_hint", codeParams("id_token_hint", "forged"), "invalid_request", "st-1", webRedirect, false},
		{"expired id_token_hint", codeParams("id_token_hint", "expired-hint"), "invalid_request", "st-1", webRedirect, false},
		{"prompt none without session", codeParams("prompt", "none"), "login_required", "st-1", webRedirect, false},
		{"prompt none implicit without session", spa("response_type", "id_token", "nonce", "n", "code_challenge", "", "code_challenge_method", "", "prompt", "none"), "login_required", "st-2", spaRedirect, true},
		{"no state", codeParams("state", "", "scope", "profile"), "invalid_scope", "", webRedirect, false},
	}
	for _, row := range rows {
		t.Run(row.name, func(t *testing.T) {
			wantError(t, e.authorize(row.params), row.base, row.code, row.state, row.fragment)
		})
	}
	t.Run("repeated scope", func(t *testing.T) {
		p := codeParams()
		p.Add("scope", "openid")
		wantError(t, e.authorize(p), webRedirect, "invalid_request", "st-1", false)
	})
	t.Run("repeated state is not echoed", func(t *testing.T) {
		p := codeParams()
		p.Add("state", "other")
		wantError(t, e.authorize(p), webRedirect, "invalid_request", "", false)
	})
	t.Run("registered query is kept", func(t *testing.T) {
		r := e.authorize(codeParams("redirect_uri", webRedirect+"?tenant=a", "scope", "email"))
		if q := r.location().Query(); q.Get("tenant") != "a" || q.Get("error") != "invalid_scope" {
			t.Errorf("redirect %s; want tenant=a kept beside the error", r.location())
		}
	})
	t.Run("form POST", func(t *testing.T) {
		wantError(t, e.post("/oauth/v2/authorize", codeParams("scope", "profile")), webRedirect, "invalid_scope", "st-1", false)
	})
	t.Run("unknown parameters and prompt values are ignored", func(t *testing.T) {
		r := e.authorize(codeParams("display", "popup", "acr_values", "urn:x", "foo", "bar", "prompt", "always login"))
		if r.StatusCode != http.StatusFound || !strings.HasPrefix(r.Header.Get("Location"), "/ui/login/login?") {
			t.Errorf("status %d Location %q; want the login page", r.StatusCode, r.Header.Get("Location"))
		}
	})
}

func TestCodeFlowLoginAndSSO(t *testing.T) {
	authntest.Run(t, func(t *testing.T, d db.Dialect) {
		e := newEnv(t, d)
		p := codeParams("redirect_uri", webRedirect+"?tenant=a")
		page := e.follow(e.authorize(p))
		for _, want := range []string{`<html lang="en">`, `<label for="loginName">`, `name="csrf"`, "Web App"} {
			if !strings.Contains(page.body, want) {
				t.Errorf("login page lacks %q", want)
			}
		}
		u := e.login(p, "alice@acme.example", "Alice-Pass-1")
		if u.Host != "rp.example" || u.Query().Get("tenant") != "a" {
			t.Errorf("redirect %s; want the registered URI with its query", u)
		}
		code := e.tok.Code(e.code(u, "st-1"))
		if code.GetClientId() != "web" || code.GetRedirectUri() != webRedirect+"?tenant=a" || code.GetUserId() != "alice-id" ||
			code.GetOrgId() != "org1" || !slices.Equal(code.GetScopes(), []string{"openid", "profile"}) || code.GetNonce() != "n-1" ||
			code.GetSessionId() == "" || !slices.Equal(code.GetAmr(), []string{"pwd"}) || !code.GetAuthTime().AsTime().Equal(e.clock()) ||
			code.GetCodeChallenge() != "" {
			t.Errorf("CreateAuthorizationCode got %v", code)
		}
		sid := code.GetSessionId()

		// The browser's session answers the next request without a page.
		e.advance(10 * time.Second)
		r := e.authorize(codeParams("state", "st-3"))
		next := e.tok.Code(e.code(r.location(), "st-3"))
		if next.GetSessionId() != sid || !next.GetAuthTime().AsTime().Equal(code.GetAuthTime().AsTime()) {
			t.Errorf("SSO: session %s auth_time %v; want %s and the original auth_time", next.GetSessionId(), next.GetAuthTime().AsTime(), sid)
		}
		// prompt=none completes silently too.
		r = e.authorize(codeParams("prompt", "none", "state", "st-4"))
		e.code(r.location(), "st-4")

		// A deactivated user's session no longer answers.
		e.dir.SetState("alice-id", 2)
		wantError(t, e.authorize(codeParams("prompt", "none")), webRedirect, "login_required", "st-1", false)
	})
}

func TestUserAgentCookie(t *testing.T) {
	e := newEnv(t, db.SQLite)
	r := e.authorize(codeParams())
	var c *http.Cookie
	for _, x := range r.Cookies() {
		if x.Name == "gatehouse_ua" {
			c = x
		}
	}
	if c == nil {
		t.Fatal("no user-agent cookie")
	}
	if !c.HttpOnly || c.SameSite != http.SameSiteLaxMode || c.Secure || c.Path != "/" || len(c.Value) < 40 {
		t.Errorf("cookie %+v; want HttpOnly, SameSite=Lax, not Secure on http, Path=/ and a long random value", c)
	}
	// prompt=none never creates a browser.
	e.newBrowser()
	r = e.authorize(codeParams("prompt", "none"))
	if len(r.Cookies()) != 0 {
		t.Errorf("prompt=none set cookies %v", r.Cookies())
	}
}

func TestPKCEAndImplicit(t *testing.T) {
	e := newEnv(t, db.SQLite)
	p := url.Values{"client_id": {"spa"}, "redirect_uri": {spaRedirect}, "scope": {"openid"}, "state": {"s"},
		"response_type": {"code"}, "code_challenge": {challenge}, "code_challenge_method": {"S256"}}
	u := e.login(p, "bob", "Bob-Pass-2")
	if c := e.tok.Code(e.code(u, "s")); c.GetCodeChallenge() != challenge || c.GetUserId() != "bob-id" {
		t.Errorf("code request %v; want the challenge and bob", c)
	}

	for _, rt := range []string{"id_token token", "token id_token", "id_token"} {
		t.Run(rt, func(t *testing.T) {
			q := url.Values{"client_id": {"spa"}, "redirect_uri": {spaRedirect}, "scope": {"openid"}, "state": {"st i"},
				"response_type": {rt}, "nonce": {"nonce-" + rt}}
			r := e.authorize(q)
			if r.StatusCode != http.StatusFound {
				t.Fatalf("status %d:\n%s", r.StatusCode, r.body)
			}
			loc := r.location()
			if loc.RawQuery != "" {
				t.Errorf("query %q; want the response in the fragment only", loc.RawQuery)
			}
			f, err := url.ParseQuery(loc.Fragment)
			if err != nil {
				t.Fatal(err)
			}
			if f.Get("state") != "st i" || f.Get("token_type") != "Bearer" || !strings.HasPrefix(f.Get("id_token"), "idt.bob-id.nonce-"+rt+".") {
				t.Errorf("fragment %v", f)
			}
			withToken := rt != "id_token"
			if (f.Get("access_token") != "") != withToken || (f.Get("expires_in") != "") != withToken {
				t.Errorf("fragment %v; access_token and expires_in present = %v", f, withToken)
			}
			last := e.tok.Implicit[len(e.tok.Implicit)-1]
			want := "id_token"
			if withToken {
				want = "id_token token"
			}
			if last.GetResponseType() != want || !slices.Equal(last.GetAmr(), []string{"pwd"}) || last.GetSessionId() == "" {
				t.Errorf("CreateImplicitTokens got %v", last)
			}
		})
	}
}

// testIssuer is the issuer the harness gives authn.
const testIssuer = "https://gatehouse.example"

// RFC 9207: every authorization response, success or error, names the
// issuer, so a client that talks to several servers detects a mix-up.
func TestAuthorizationResponseIssuer(t *testing.T) {
	e := newEnv(t, db.SQLite)
	u := e.login(codeParams(), "alice", "Alice-Pass-1")
	if got := u.Query().Get("iss"); got != testIssuer || u.Query().Get("code") == "" {
		t.Errorf("code response %s: iss %q; want %q", u, got, testIssuer)
	}
	loc, err := url.Parse(e.authorize(codeParams("scope", "profile")).Header.Get("Location"))
	if err != nil || loc.Query().Get("error") != "invalid_scope" || loc.Query().Get("iss") != testIssuer {
		t.Errorf("error response %v (%v): want invalid_scope with iss %q", loc, err, testIssuer)
	}
}

// TestNativeLoopbackRedirect: a native app's registered loopback redirect
// URI matches the request's with any port (RFC 8252 §7.3), and the
// response goes to the request's URI, port included; every other
// difference, and every other app type, still gets the error page.
func TestNativeLoopbackRedirect(t *testing.T) {
	e := newEnv(t, db.SQLite)
	e.dir.Clients["cli"] = &directoryv1.Client{ClientId: "cli", Kind: directoryv1.ClientKind_CLIENT_KIND_OIDC_APP, OrgId: "org1", Active: true,
		Name: "CLI", AppType: "native", RedirectUris: []string{"http://127.0.0.1/callback", "http://[::1]/callback"},
		ResponseTypes: []string{"code"}, GrantTypes: []string{"authorization_code", "refresh_token"}, AuthMethod: directoryv1.AuthMethod_AUTH_METHOD_NONE}
	webLoopback := proto.Clone(e.dir.Clients["cli"]).(*directoryv1.Client)
	webLoopback.ClientId, webLoopback.AppType = "web-loopback", "web"
	e.dir.Clients["web-loopback"] = webLoopback
	params := func(client, redirect string) url.Values {
		return url.Values{"client_id": {client}, "redirect_uri": {redirect}, "response_type": {"code"}, "scope": {"openid"},
			"state": {"st-n"}, "code_challenge": {challenge}, "code_challenge_method": {"S256"}}
	}

	for _, redirect := range []string{"http://127.0.0.1:53121/callback", "http://[::1]:40000/callback"} {
		e.newBrowser()
		u := e.login(params("cli", redirect), "alice@acme.example", "Alice-Pass-1")
		u2 := *u
		u2.RawQuery = ""
		if u2.String() != redirect {
			t.Fatalf("redirect %s; want the request's %s, port included", u, redirect)
		}
		if code := e.tok.Code(e.code(u, "st-n")); code.GetRedirectUri() != redirect {
			t.Fatalf("code made for %q; want %q (the token request must send it)", code.GetRedirectUri(), redirect)
		}
		// The session answers the same app on another port.
		r := e.authorize(params("cli", "http://127.0.0.1:1024/callback"))
		if loc := r.location(); r.StatusCode != http.StatusFound || loc.Host != "127.0.0.1:1024" || loc.Query().Get("code") == "" {
			t.Fatalf("SSO on another port: %d %s", r.StatusCode, r.Header.Get("Location"))
		}
	}

	for _, tc := range []struct{ name, client, redirect string }{
		{"localhost gets no exception", "cli", "http://localhost:53121/callback"},
		{"other path", "cli", "http://127.0.0.1:53121/other"},
		{"query added", "cli", "http://127.0.0.1:53121/callback?x=1"},
		{"userinfo", "cli", "http://evil@127.0.0.1:53121/callback"},
		{"fragment", "cli", "http://127.0.0.1:53121/callback#x"},
		{"https", "cli", "https://127.0.0.1:53121/callback"},
		{"web app", "web-loopback", "http://127.0.0.1:53121/callback"},
	} {
		r := e.authorize(params(tc.client, tc.redirect))
		if r.StatusCode != http.StatusBadRequest || r.Header.Get("Location") != "" || !strings.Contains(r.body, "invalid_request") {
			t.Errorf("%s: status %d, Location %q; want the error page", tc.name, r.StatusCode, r.Header.Get("Location"))
		}
	}
	// The exact URI works for every app type.
	e.newBrowser()
	e.login(params("web-loopback", "http://127.0.0.1/callback"), "alice@acme.example", "Alice-Pass-1")
}
