package service_test

import (
	"bytes"
	"html"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gatehouse-id/gatehouse/pkg/db"
	directoryv1 "github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/directory/v1"
	"github.com/gatehouse-id/gatehouse/pkg/logging"
	"github.com/gatehouse-id/gatehouse/services/authn/internal/authntest"
	"github.com/gatehouse-id/gatehouse/services/authn/service"
)

const (
	webRedirect = "https://rp.example/cb"
	spaRedirect = "https://spa.example/cb"
	challenge   = "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM" // RFC 7636 appendix B
)

// env is authn's public handler on a real database, with fakes of the
// directory and tokens services and a browser (cookie jar, redirects not
// followed so each hop is asserted).
type env struct {
	t    *testing.T
	srv  *httptest.Server
	dir  *authntest.Directory
	tok  *authntest.Tokens
	db   *db.DB
	mu   sync.Mutex
	now  time.Time
	jar  http.CookieJar
	http *http.Client
}

// newEnv starts the handler; opts adjust its options.
func newEnv(t *testing.T, d db.Dialect, opts ...func(*service.HandlerOptions)) *env {
	t.Helper()
	e := &env{t: t, dir: authntest.NewDirectory(), tok: authntest.NewTokens(), db: authntest.Open(t, d),
		now: time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)}
	e.dir.Orgs["org1"] = &directoryv1.GetOrgResponse{Id: "org1", Name: "Acme", PrimaryDomain: "acme.example", Active: true,
		PasswordPolicy: &directoryv1.PasswordPolicy{MinLength: 8, HasUppercase: true, HasNumber: true},
		LoginPolicy:    &directoryv1.LoginPolicy{AllowUsernamePassword: true, AllowRegister: true, IgnoreUnknownUsernames: true}}
	e.dir.Orgs["org2"] = &directoryv1.GetOrgResponse{Id: "org2", Name: "Other", PrimaryDomain: "other.example", Active: true,
		LoginPolicy: &directoryv1.LoginPolicy{AllowUsernamePassword: true, IgnoreUnknownUsernames: true}}
	e.dir.Orgs["org3"] = &directoryv1.GetOrgResponse{Id: "org3", Name: "Gone", PrimaryDomain: "gone.example", Active: false}
	e.dir.Clients["web"] = &directoryv1.Client{ClientId: "web", Kind: directoryv1.ClientKind_CLIENT_KIND_OIDC_APP, OrgId: "org1", Active: true, Name: "Web App",
		RedirectUris: []string{webRedirect, webRedirect + "?tenant=a"}, PostLogoutRedirectUris: []string{"https://rp.example/bye?x=1"},
		ResponseTypes: []string{"code"}, GrantTypes: []string{"authorization_code", "refresh_token"},
		AuthMethod: directoryv1.AuthMethod_AUTH_METHOD_CLIENT_SECRET_BASIC}
	e.dir.Clients["spa"] = &directoryv1.Client{ClientId: "spa", Kind: directoryv1.ClientKind_CLIENT_KIND_OIDC_APP, OrgId: "org1", Active: true, Name: "SPA",
		RedirectUris: []string{spaRedirect}, PostLogoutRedirectUris: []string{"https://spa.example/"},
		ResponseTypes: []string{"code", "id_token", "id_token token"}, GrantTypes: []string{"authorization_code", "implicit"},
		AuthMethod: directoryv1.AuthMethod_AUTH_METHOD_NONE}
	e.dir.Clients["off"] = &directoryv1.Client{ClientId: "off", Kind: directoryv1.ClientKind_CLIENT_KIND_OIDC_APP, OrgId: "org1", Active: false,
		RedirectUris: []string{webRedirect}, ResponseTypes: []string{"code"}, GrantTypes: []string{"authorization_code"}}
	e.dir.Clients["api"] = &directoryv1.Client{ClientId: "api", Kind: directoryv1.ClientKind_CLIENT_KIND_API_APP, OrgId: "org1", Active: true,
		RedirectUris: []string{webRedirect}}
	e.dir.AddUser("alice-id", "org1", "alice", "Alice-Pass-1")
	e.dir.AddUser("bob-id", "org1", "bob", "Bob-Pass-2")
	e.dir.AddUser("carol-id", "org2", "carol", "Carol-Pass-3")

	o := service.HandlerOptions{DB: e.db, Directory: e.dir, Tokens: e.tok, Issuer: testIssuer, MasterKey: bytes.Repeat([]byte{9}, 32),
		Now: e.clock, Logger: logging.Discard()}
	for _, opt := range opts {
		opt(&o)
	}
	h, err := service.NewHandler(o)
	if err != nil {
		t.Fatal(err)
	}
	e.srv = httptest.NewServer(h)
	t.Cleanup(e.srv.Close)
	e.newBrowser()
	return e
}

// newBrowser starts a browser without cookies.
func (e *env) newBrowser() {
	jar, err := cookiejar.New(nil)
	if err != nil {
		e.t.Fatal(err)
	}
	e.jar = jar
	e.http = &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

func (e *env) clock() time.Time {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.now
}

func (e *env) advance(d time.Duration) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.now = e.now.Add(d)
}

// response is a read response.
type response struct {
	*http.Response
	body string
}

func (r response) location() *url.URL {
	loc, err := url.Parse(r.Header.Get("Location"))
	if err != nil {
		panic(err)
	}
	return loc
}

func (e *env) do(req *http.Request) response {
	e.t.Helper()
	resp, err := e.http.Do(req)
	if err != nil {
		e.t.Fatalf("%s %s: %v", req.Method, req.URL, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	return response{resp, string(b)}
}

func (e *env) get(path string, header ...string) response {
	e.t.Helper()
	req, err := http.NewRequest(http.MethodGet, e.srv.URL+path, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	return e.do(req)
}

func (e *env) post(path string, form url.Values, header ...string) response {
	e.t.Helper()
	req, err := http.NewRequest(http.MethodPost, e.srv.URL+path, strings.NewReader(form.Encode()))
	if err != nil {
		e.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	return e.do(req)
}

func (e *env) authorize(p url.Values, header ...string) response {
	e.t.Helper()
	return e.get("/oauth/v2/authorize?"+p.Encode(), header...)
}

// follow follows redirects within authn (relative locations) and returns
// the first response that is a page or a redirect elsewhere.
func (e *env) follow(r response, header ...string) response {
	e.t.Helper()
	for i := 0; i < 10 && r.StatusCode >= 300 && r.StatusCode < 400; i++ {
		loc := r.Header.Get("Location")
		if !strings.HasPrefix(loc, "/") {
			return r
		}
		r = e.get(loc, header...)
	}
	return r
}

var (
	hiddenRE = regexp.MustCompile(`<input type="hidden" name="([^"]+)" value="([^"]*)">`)
	actionRE = regexp.MustCompile(`<form method="post" action="([^"]+)"`)
)

// submit fills the page's form: its hidden fields plus fields.
func (e *env) submit(page response, fields url.Values, header ...string) response {
	e.t.Helper()
	m := actionRE.FindStringSubmatch(page.body)
	if m == nil {
		e.t.Fatalf("no form on page (status %d):\n%s", page.StatusCode, page.body)
	}
	form := url.Values{}
	for _, h := range hiddenRE.FindAllStringSubmatch(page.body, -1) {
		form.Set(h[1], html.UnescapeString(h[2]))
	}
	for k, v := range fields {
		form[k] = v
	}
	return e.post(html.UnescapeString(m[1]), form, header...)
}

// codeParams is a valid code-flow request of the web client.
func codeParams(extra ...string) url.Values {
	p := url.Values{"client_id": {"web"}, "redirect_uri": {webRedirect}, "response_type": {"code"},
		"scope": {"openid profile"}, "state": {"st-1"}, "nonce": {"n-1"}}
	for i := 0; i+1 < len(extra); i += 2 {
		if extra[i+1] == "" {
			p.Del(extra[i])
			continue
		}
		p.Set(extra[i], extra[i+1])
	}
	return p
}

// login runs the login pages from an authorization request to the redirect
// back to the client.
func (e *env) login(p url.Values, loginName, password string) *url.URL {
	e.t.Helper()
	page := e.follow(e.authorize(p))
	if !strings.Contains(page.body, `name="loginName"`) {
		e.t.Fatalf("want the login name page; got status %d:\n%s", page.StatusCode, page.body)
	}
	page = e.follow(e.submit(page, url.Values{"loginName": {loginName}}))
	if !strings.Contains(page.body, `name="password"`) {
		e.t.Fatalf("want the password page; got status %d:\n%s", page.StatusCode, page.body)
	}
	return e.password(page, password)
}

// password submits the password page and returns the client redirect.
func (e *env) password(page response, password string) *url.URL {
	e.t.Helper()
	r := e.submit(page, url.Values{"password": {password}})
	if r.StatusCode != http.StatusFound {
		e.t.Fatalf("password: status %d; want 302:\n%s", r.StatusCode, r.body)
	}
	return r.location()
}

// code checks a code redirect and returns the code's request.
func (e *env) code(u *url.URL, state string) string {
	e.t.Helper()
	q := u.Query()
	if q.Get("error") != "" {
		e.t.Fatalf("redirect %s: error %s: %s", u, q.Get("error"), q.Get("error_description"))
	}
	if q.Get("state") != state {
		e.t.Errorf("state = %q; want %q", q.Get("state"), state)
	}
	c := q.Get("code")
	if e.tok.Code(c) == nil {
		e.t.Fatalf("redirect %s: code %q was not created by tokens", u, c)
	}
	return c
}

// wantError checks an error redirect.
func wantError(t *testing.T, r response, base, code, state string, fragment bool) {
	t.Helper()
	if r.StatusCode != http.StatusFound {
		t.Fatalf("status %d; want 302 with error %s:\n%s", r.StatusCode, code, r.body)
	}
	u := r.location()
	var q url.Values
	if fragment {
		if u.RawQuery != "" {
			t.Errorf("query %q; want the error in the fragment", u.RawQuery)
		}
		var err error
		if q, err = url.ParseQuery(u.Fragment); err != nil {
			t.Fatal(err)
		}
	} else {
		if u.Fragment != "" {
			t.Errorf("fragment %q; want the error in the query", u.Fragment)
		}
		q = u.Query()
	}
	u.RawQuery, u.Fragment = "", ""
	if u.String() != base {
		t.Errorf("redirect to %s; want %s", u, base)
	}
	if q.Get("error") != code || q.Get("state") != state || q.Get("error_description") == "" {
		t.Errorf("got error=%q state=%q description=%q; want error=%q state=%q and a description",
			q.Get("error"), q.Get("state"), q.Get("error_description"), code, state)
	}
}
