package service_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/gatehouse-id/gatehouse/pkg/db"
	"github.com/gatehouse-id/gatehouse/services/authn/internal/authntest"
	"github.com/gatehouse-id/gatehouse/services/authn/service"
)

// push posts a pushed authorization request (RFC 9126) with form, and
// Basic credentials when user is set.
func (e *env) push(form url.Values, user, pass string) (int, map[string]any) {
	e.t.Helper()
	req, err := http.NewRequest(http.MethodPost, e.srv.URL+"/oauth/v2/par", strings.NewReader(form.Encode()))
	if err != nil {
		e.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if user != "" {
		req.SetBasicAuth(user, pass)
	}
	r := e.do(req)
	var m map[string]any
	if err := json.Unmarshal([]byte(r.body), &m); err != nil {
		e.t.Fatalf("PAR answered %d, not JSON: %s", r.StatusCode, r.body)
	}
	if r.Header.Get("Cache-Control") != "no-store" {
		e.t.Errorf("PAR Cache-Control %q", r.Header.Get("Cache-Control"))
	}
	return r.StatusCode, m
}

// TestPushedAuthorizationRequests: RFC 9126 — the client authenticates,
// the request is validated when pushed (errors as JSON), the request_uri
// works once, only for its client, within its minute, and carries the
// whole request.
func TestPushedAuthorizationRequests(t *testing.T) {
	t.Parallel()
	authntest.Run(t, testPushedAuthorizationRequests)
}

func testPushedAuthorizationRequests(t *testing.T, d db.Dialect) {
	e := newEnv(t, d)
	e.tok.Secrets["web"] = "web-secret"

	st, res := e.push(codeParams(), "web", "web-secret")
	uri, _ := res["request_uri"].(string)
	if st != http.StatusCreated || !strings.HasPrefix(uri, "urn:ietf:params:oauth:request_uri:") || res["expires_in"] != float64(60) {
		t.Fatalf("push: %d %v", st, res)
	}
	// Another client cannot use it; the attempt does not use it up.
	if r := e.authorize(url.Values{"client_id": {"spa"}, "request_uri": {uri}}); r.StatusCode != 400 ||
		!strings.Contains(r.body, "invalid_request_uri") || r.Header.Get("Location") != "" {
		t.Fatalf("another client's request_uri: %d\n%s", r.StatusCode, r.body)
	}
	// Parameters beside the request_uri are ignored: the pushed ones count.
	u := e.login(url.Values{"client_id": {"web"}, "request_uri": {uri}, "state": {"forged"}, "redirect_uri": {webRedirect + "?tenant=a"}},
		"alice", "Alice-Pass-1")
	if !strings.HasPrefix(u.String(), webRedirect+"?") || u.Query().Get("tenant") != "" {
		t.Fatalf("redirect %s; want the pushed redirect_uri", u)
	}
	e.code(u, "st-1")
	// Once only.
	if r := e.authorize(url.Values{"client_id": {"web"}, "request_uri": {uri}}); r.StatusCode != 400 || !strings.Contains(r.body, "invalid_request_uri") {
		t.Fatalf("used request_uri: %d\n%s", r.StatusCode, r.body)
	}
	// Expired after a minute.
	_, res = e.push(codeParams(), "web", "web-secret")
	e.advance(61e9)
	if r := e.authorize(url.Values{"client_id": {"web"}, "request_uri": {res["request_uri"].(string)}}); r.StatusCode != 400 ||
		!strings.Contains(r.body, "invalid_request_uri") {
		t.Fatalf("expired request_uri: %d\n%s", r.StatusCode, r.body)
	}
	// A request_uri Gatehouse did not issue is never fetched.
	if r := e.authorize(url.Values{"client_id": {"web"}, "request_uri": {"https://rp.example/req/1"}}); r.StatusCode != 400 ||
		!strings.Contains(r.body, "invalid_request_uri") {
		t.Fatalf("URL request_uri: %d\n%s", r.StatusCode, r.body)
	}

	// Refusals at the endpoint, as JSON.
	for _, tc := range []struct {
		name       string
		form       url.Values
		user, pass string
		status     int
		code       string
	}{
		{"wrong secret", codeParams(), "web", "nope", 401, "invalid_client"},
		{"no client", codeParams("client_id", ""), "", "", 400, "invalid_client"},
		{"public client with a secret it has not", codeParams("client_id", "spa", "client_secret", "x"), "", "", 400, "invalid_client"},
		{"request_uri pushed", codeParams("request_uri", "urn:ietf:params:oauth:request_uri:x"), "web", "web-secret", 400, "invalid_request"},
		{"unregistered redirect_uri", codeParams("redirect_uri", "https://evil.example/cb"), "web", "web-secret", 400, "invalid_request"},
		{"bad scope", codeParams("scope", "profile"), "web", "web-secret", 400, "invalid_scope"},
		{"unsupported response_type", codeParams("response_type", "token"), "web", "web-secret", 400, "unsupported_response_type"},
		{"public client without PKCE", url.Values{"client_id": {"spa"}, "redirect_uri": {spaRedirect}, "response_type": {"code"},
			"scope": {"openid"}}, "", "", 400, "invalid_request"},
	} {
		st, res := e.push(tc.form, tc.user, tc.pass)
		if st != tc.status || res["error"] != tc.code {
			t.Errorf("%s: %d %v; want %d %s", tc.name, st, res, tc.status, tc.code)
		}
	}
	if r := e.get("/oauth/v2/par"); r.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("GET: %d", r.StatusCode)
	}
	// A public client pushes with its client_id (and PKCE).
	st, res = e.push(url.Values{"client_id": {"spa"}, "redirect_uri": {spaRedirect}, "response_type": {"code"}, "scope": {"openid"},
		"code_challenge": {challenge}, "code_challenge_method": {"S256"}}, "", "")
	if st != http.StatusCreated {
		t.Fatalf("public push: %d %v", st, res)
	}
}

// TestRequirePAR: a client that requires pushed requests, and the
// server-wide switch, refuse plain ones on the error page.
func TestRequirePAR(t *testing.T) {
	t.Parallel()
	e := newEnv(t, db.SQLite)
	e.tok.Secrets["web"] = "web-secret"
	e.dir.Clients["web"].RequirePushedAuthorizationRequests = true
	if r := e.authorize(codeParams()); r.StatusCode != 400 || r.Header.Get("Location") != "" || !strings.Contains(r.body, "must be pushed") {
		t.Fatalf("plain request of a PAR client: %d\n%s", r.StatusCode, r.body)
	}
	_, res := e.push(codeParams(), "web", "web-secret")
	u := e.login(url.Values{"client_id": {"web"}, "request_uri": {res["request_uri"].(string)}}, "alice", "Alice-Pass-1")
	e.code(u, "st-1")

	all := newEnv(t, db.SQLite, func(o *service.HandlerOptions) { o.RequirePAR = true })
	if r := all.authorize(codeParams()); r.StatusCode != 400 || !strings.Contains(r.body, "must be pushed") {
		t.Fatalf("plain request under GATEHOUSE_REQUIRE_PAR: %d\n%s", r.StatusCode, r.body)
	}
}

// TestRequestObjects: the claims of a verified request object are the
// request; parameters outside it are ignored; nested request parameters,
// another client_id and an object that does not verify are refused on the
// error page (nothing of the request is trusted yet).
func TestRequestObjects(t *testing.T) {
	t.Parallel()
	e := newEnv(t, db.SQLite)
	obj := func(raw string, claims map[string]any) string {
		b, _ := json.Marshal(claims)
		e.tok.RequestObjects[raw] = b
		return raw
	}
	claims := map[string]any{"iss": "web", "aud": testIssuer, "exp": 2e9, "jti": "j1", "client_id": "web",
		"redirect_uri": webRedirect, "response_type": "code", "scope": "openid profile", "state": "from-object", "nonce": "n", "max_age": 300}
	raw := obj("object-1", claims)
	// Outside: another state and redirect_uri, ignored.
	u := e.login(url.Values{"client_id": {"web"}, "request": {raw}, "state": {"outside"}, "redirect_uri": {webRedirect + "?tenant=a"},
		"response_type": {"code"}, "scope": {"openid"}}, "alice", "Alice-Pass-1")
	e.code(u, "from-object")
	if u.Query().Get("tenant") != "" {
		t.Fatalf("redirect %s; want the object's redirect_uri", u)
	}
	for _, tc := range []struct {
		name  string
		query url.Values
		want  string
	}{
		{"does not verify (alg none, foreign key, aud, exp, replayed jti: the tokens service's verdict)",
			url.Values{"client_id": {"web"}, "request": {"eyJhbGciOiJub25lIn0.e30."}}, "invalid_request_object"},
		{"another client_id inside", url.Values{"client_id": {"web"}, "request": {obj("object-2", map[string]any{"client_id": "spa",
			"redirect_uri": webRedirect, "response_type": "code", "scope": "openid"})}}, "invalid_request_object"},
		{"a request_uri inside", url.Values{"client_id": {"web"}, "request": {obj("object-3", map[string]any{"request_uri": "urn:x",
			"redirect_uri": webRedirect, "response_type": "code", "scope": "openid"})}}, "invalid_request_object"},
		{"request and request_uri", url.Values{"client_id": {"web"}, "request": {"x"}, "request_uri": {"urn:ietf:params:oauth:request_uri:y"}},
			"invalid_request"},
	} {
		r := e.authorize(tc.query)
		if r.StatusCode != 400 || r.Header.Get("Location") != "" || !strings.Contains(r.body, tc.want) {
			t.Errorf("%s: %d %q\n%s", tc.name, r.StatusCode, r.Header.Get("Location"), r.body)
		}
	}
	// The same object, pushed: verified once, at the push.
	e.tok.Secrets["web"] = "web-secret"
	raw = obj("object-4", claims)
	st, res := e.push(url.Values{"request": {raw}}, "web", "web-secret")
	if st != http.StatusCreated {
		t.Fatalf("push of a request object: %d %v", st, res)
	}
	e.newBrowser()
	u = e.login(url.Values{"client_id": {"web"}, "request_uri": {res["request_uri"].(string)}}, "alice", "Alice-Pass-1")
	e.code(u, "from-object")
}
