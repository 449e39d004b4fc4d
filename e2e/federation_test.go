package e2e

import (
	"html"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/zitadel/oidc/v3/example/server/exampleop"
	"github.com/zitadel/oidc/v3/example/server/storage"

	"github.com/gatehouse-id/gatehouse/pkg/config"
	"github.com/gatehouse-id/gatehouse/pkg/testutil"
)

// A second Gatehouse is the upstream identity provider of the first: its
// web app's redirect URI is the first's /idps/callback. The upstream runs
// as "localhost", the downstream as 127.0.0.1, so the browser's cookies of
// the two stay apart.
type fedUpstream struct {
	issuer, base, admin string
	clientID, secret    string
}

func startUpstream(t *testing.T, callback string) *fedUpstream {
	t.Helper()
	return startUpstreamOn(t, "localhost", callback)
}

// startUpstreamOn is startUpstream with its issuer on host.
func startUpstreamOn(t *testing.T, host, callback string) *fedUpstream {
	t.Helper()
	dir := t.TempDir()
	addr := freeAddr(t)
	_, port, _ := strings.Cut(addr, ":")
	u := &fedUpstream{issuer: "http://" + host + ":" + port}
	p := startProc(t, config.RoleEdge, map[string]string{
		"GATEHOUSE_DATA_DIR": dir, "GATEHOUSE_ADDR": addr, "GATEHOUSE_ISSUER": u.issuer,
		"GATEHOUSE_ADMIN_PASSWORD": "Upstream-Passw0rd-1",
	})
	u.base = p.base
	_, tok := operatorToken(t, p.base, dir, u.issuer)
	u.admin = tok["access_token"].(string)
	status, proj := restJSON(t, "POST", p.base+"/management/v1/projects", u.admin, map[string]any{"name": "Downstream"})
	if status != 200 {
		t.Fatalf("upstream AddProject: %d %v", status, proj)
	}
	status, app := restJSON(t, "POST", p.base+"/management/v1/projects/"+proj["id"].(string)+"/apps/oidc", u.admin, map[string]any{
		"name": "downstream", "redirectUris": []string{callback}, "responseTypes": []string{"OIDC_RESPONSE_TYPE_CODE"},
		"grantTypes": []string{"OIDC_GRANT_TYPE_AUTHORIZATION_CODE"}, "appType": "OIDC_APP_TYPE_WEB",
		"authMethodType": "OIDC_AUTH_METHOD_TYPE_BASIC"})
	if status != 200 {
		t.Fatalf("upstream AddOIDCApp: %d %v", status, app)
	}
	u.clientID, u.secret = app["clientId"].(string), app["clientSecret"].(string)
	if status, r := restJSON(t, "POST", p.base+"/management/v1/users/human/_import", u.admin, map[string]any{
		"userName": "fed", "profile": map[string]any{"firstName": "Fede", "lastName": "Rated"},
		"email": map[string]any{"email": "fed@upstream.example"}, "password": "Fed-Passw0rd!1"}); status != 200 {
		t.Fatalf("upstream user: %d %v", status, r)
	}
	return u
}

// fedBrowser follows redirects between the two servers and stops at the
// relying party.
func fedBrowser(hosts ...string) *http.Client {
	jar, _ := cookiejar.New(nil)
	return &http.Client{Jar: jar, CheckRedirect: func(req *http.Request, _ []*http.Request) error {
		for _, h := range hosts {
			if strings.HasPrefix(req.URL.String(), h) {
				return nil
			}
		}
		return http.ErrUseLastResponse
	}}
}

// TestFederationGatehouseUpstream: the shortcut scope sends the browser
// to the upstream, whose user is registered downstream at the first
// sign-in (autoRegister) and signed in by the link the next time; the
// login page shows the provider's button.
func TestFederationGatehouseUpstream(t *testing.T) {
	e := afStartEnv(t, map[string]string{"GATEHOUSE_IDP_ALLOW_LOOPBACK": "true"})
	up := startUpstream(t, e.base+"/idps/callback")
	idp := e.must("POST", "/management/v1/idps/oidc", e.admin, "", map[string]any{
		"name": "Upstream", "clientId": up.clientID, "clientSecret": up.secret, "issuer": up.issuer,
		"scopes": []string{"openid", "profile", "email"}, "autoRegister": true,
		"usernameMapping": "OIDC_MAPPING_FIELD_PREFERRED_USERNAME"})["idpId"].(string)

	signIn := func(state string) afIDToken {
		c := fedBrowser(e.base, up.issuer)
		p := afGet(t, c, e.authURL(state, "n-"+state, "scope", "openid profile urn:gatehouse:iam:org:idp:id:"+idp))
		if !afIs(p, "loginName") || !strings.Contains(p.body, "downstream") {
			t.Fatalf("want the upstream's login page for the downstream app; got %d %v:\n%s", p.status, p.loc, p.body)
		}
		p = afSubmit(t, c, up.issuer, p, url.Values{"loginName": {"fed"}})
		p = afSubmit(t, c, up.issuer, p, url.Values{"password": {"Fed-Passw0rd!1"}})
		// amr is the upstream's: its ID token says pwd.
		return e.code(p, state, "n-"+state)
	}
	first := signIn("f1")
	second := signIn("f2")
	if first.Subject == "" || second.Subject != first.Subject {
		t.Fatalf("subjects %q and %q; want the same downstream user twice", first.Subject, second.Subject)
	}
	// The registered user is the downstream's own, named by the mapping.
	u := e.must("GET", "/management/v1/users/"+first.Subject, e.admin, "", nil)["user"].(map[string]any)
	if name, _ := u["userName"].(string); !strings.HasPrefix(name, "fed@") {
		t.Errorf("registered user name %q; want the upstream's preferred_username fed@…", name)
	}
	// The link is listed, and removing it makes the identity unknown: its
	// registration finds the name taken, and the page offers to link the
	// identity to that account by its password (nothing created).
	links := e.must("POST", "/management/v1/users/"+first.Subject+"/idps/_search", e.admin, "", map[string]any{})
	res, _ := links["result"].([]any)
	if len(res) != 1 || res[0].(map[string]any)["idpId"] != idp || !strings.HasPrefix(res[0].(map[string]any)["providedUserName"].(string), "fed@") {
		t.Fatalf("links of the registered user: %v", links)
	}
	e.must("DELETE", "/management/v1/users/"+first.Subject+"/idps/"+idp+"/"+res[0].(map[string]any)["providedUserId"].(string), e.admin, "", nil)
	before := e.userCount()
	c := fedBrowser(e.base, up.issuer)
	p := afGet(t, c, e.authURL("f3", "n-f3", "scope", "openid profile urn:gatehouse:iam:org:idp:id:"+idp))
	p = afSubmit(t, c, up.issuer, p, url.Values{"loginName": {"fed"}})
	p = afSubmit(t, c, up.issuer, p, url.Values{"password": {"Fed-Passw0rd!1"}})
	if !strings.Contains(p.body, "exists already") || strings.Contains(p.body, "/ui/login/idp/register") || e.userCount() != before {
		t.Errorf("after unlinking, the identity's name is taken: %d %v; want the link page without registration, and no new user", p.status, p.loc)
	}

	// The login page offers the provider.
	p = afGet(t, fedBrowser(e.base), e.authURL("lp", "n-lp"))
	if !strings.Contains(p.body, `name="idpID" value="`+idp+`"`) || !strings.Contains(p.body, "Sign in with Upstream") {
		t.Errorf("login page without the Upstream button:\n%s", p.body)
	}
}

// Two Gatehouses on one host name (an upstream and a downstream in
// development): browsers keep cookies by host, not port, so each names its
// cookie by its port and neither overwrites the other's browser identity
// (before, the sign-in failed with the "unknown, expired or already used"
// page).
func TestFederationTwoGatehousesOnOneHost(t *testing.T) {
	e := afStartEnv(t, map[string]string{"GATEHOUSE_IDP_ALLOW_LOOPBACK": "true"})
	up := startUpstreamOn(t, "127.0.0.1", e.base+"/idps/callback")
	idp := e.must("POST", "/management/v1/idps/oidc", e.admin, "", map[string]any{
		"name": "Upstream", "clientId": up.clientID, "clientSecret": up.secret, "issuer": up.issuer,
		"scopes": []string{"openid", "profile", "email"}, "autoRegister": true})["idpId"].(string)
	c := fedBrowser(e.base, up.issuer)
	p := afGet(t, c, e.authURL("h1", "n-h1", "scope", "openid profile urn:gatehouse:iam:org:idp:id:"+idp))
	p = afSubmit(t, c, up.issuer, p, url.Values{"loginName": {"fed"}})
	p = afSubmit(t, c, up.issuer, p, url.Values{"password": {"Fed-Passw0rd!1"}})
	if it := e.code(p, "h1", "n-h1"); it.Subject == "" {
		t.Fatal("no user signed in through the upstream on the same host")
	}
}

// Failures create nothing and say what happened: an unknown provider in
// the shortcut scope, a cancellation at the provider, a replayed callback,
// and a provider on a forbidden address.
func TestFederationFailures(t *testing.T) {
	e := afStartEnv(t, map[string]string{"GATEHOUSE_IDP_ALLOW_LOOPBACK": "true"})
	up := startUpstream(t, e.base+"/idps/callback")
	idp := e.must("POST", "/management/v1/idps/oidc", e.admin, "", map[string]any{
		"name": "Upstream", "clientId": up.clientID, "clientSecret": up.secret, "issuer": up.issuer, "autoRegister": true,
	})["idpId"].(string)
	before := e.userCount()
	shortcut := func(id, state string) string {
		return e.authURL(state, "n-"+state, "scope", "openid urn:gatehouse:iam:org:idp:id:"+id)
	}
	// An unknown provider is invalid_scope at the client.
	afErrorRedirect(t, afGet(t, fedBrowser(e.base), shortcut("no-such-idp", "u1")), afRedirect, "invalid_scope", "u1", false)

	// The browser stops at the provider: the state is in the redirect.
	c := fedBrowser(e.base)
	p := afGet(t, c, shortcut(idp, "c1"))
	if p.loc == nil || !strings.HasPrefix(p.loc.String(), up.issuer+"/oauth/v2/authorize") {
		t.Fatalf("want a redirect to the upstream; got %d %v", p.status, p.loc)
	}
	q := p.loc.Query()
	if q.Get("code_challenge_method") != "S256" || q.Get("nonce") == "" || q.Get("state") == "" || q.Get("redirect_uri") != e.base+"/idps/callback" {
		t.Errorf("authorization request to the upstream lacks PKCE, nonce, state or the callback: %v", q)
	}
	cancel := e.base + "/idps/callback?" + url.Values{"state": {q.Get("state")}, "error": {"access_denied"}}.Encode()
	afErrorRedirect(t, afGet(t, c, cancel), afRedirect, "access_denied", "c1", false)
	// The same state again: refused on Gatehouse's own page.
	if again := afGet(t, c, cancel); again.status != http.StatusBadRequest || again.loc != nil {
		t.Errorf("replayed callback: %d %v; want the 400 error page", again.status, again.loc)
	}
	// A forged state in another browser is refused too.
	if forged := afGet(t, fedBrowser(e.base), e.base+"/idps/callback?state=forged&code=x"); forged.status != http.StatusBadRequest {
		t.Errorf("forged state: %d; want 400", forged.status)
	}
	if n := e.userCount(); n != before {
		t.Errorf("%d users after the failures; want the %d before", n, before)
	}

	// A login policy without external sign-in refuses the shortcut too.
	e.must("POST", "/management/v1/policies/login", e.admin, "", map[string]any{"allowUsernamePassword": true, "allowExternalIdp": false})
	if off := afGet(t, fedBrowser(e.base), shortcut(idp, "p1")); off.status != http.StatusForbidden || off.loc != nil {
		t.Errorf("shortcut with external sign-in off: %d %v; want the 403 page", off.status, off.loc)
	}
	if page := afGet(t, fedBrowser(e.base), e.authURL("p2", "n-p2")); strings.Contains(page.body, `name="idpID"`) {
		t.Error("the login page shows provider buttons with external sign-in off")
	}

	// Without GATEHOUSE_IDP_ALLOW_LOOPBACK a provider on loopback is refused
	// (server-side request forgery), and the user is told.
	d := afStart(t)
	local := d.must("POST", "/management/v1/idps/oidc", d.admin, "", map[string]any{
		"name": "Local", "clientId": "c", "clientSecret": "s", "issuer": up.issuer})["idpId"].(string)
	refused := afGet(t, fedBrowser(d.base), d.authURL("l1", "n-l1", "scope", "openid urn:gatehouse:iam:org:idp:id:"+local))
	if refused.status != http.StatusBadGateway || !strings.Contains(refused.body, "cannot be reached") {
		t.Errorf("provider on loopback: %d %v; want the 502 page", refused.status, refused.loc)
	}
	// An issuer naming a refused address is refused when it is added,
	// before anything dials it: loopback here, and a metadata address
	// whatever the configuration.
	for i, iss := range []string{strings.Replace(up.issuer, "localhost", "127.0.0.1", 1), "https://100.100.100.200"} {
		status, res := d.call("POST", "/management/v1/idps/oidc", d.admin, "", map[string]any{
			"name": "Literal " + strconv.Itoa(i), "clientId": "c", "clientSecret": "s", "issuer": iss})
		if msg, _ := res["message"].(string); status != http.StatusBadRequest || !strings.Contains(msg, "issuer names ") {
			t.Errorf("provider at %s: %d %v; want 400 naming the address rule", iss, status, res)
		}
	}
}

// userCount is the number of users of the home organization.
func (e *afEnv) userCount() int {
	e.t.Helper()
	res := e.must("POST", "/management/v1/users/_search", e.admin, "", map[string]any{"query": map[string]any{"limit": 1}})
	total, _ := res["details"].(map[string]any)["totalResult"].(string)
	n, err := strconv.Atoi(total)
	if err != nil {
		e.t.Fatalf("user count %q: %v", total, err)
	}
	return n
}

// An OpenID Provider that no Gatehouse code serves: zitadel/oidc's op
// package with its example storage and login form. Its user signs in to
// Gatehouse through it and is registered with the e-mail mapping.
func TestFederationThirdPartyOP(t *testing.T) {
	e := afStartEnv(t, map[string]string{"GATEHOUSE_IDP_ALLOW_LOOPBACK": "true"})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	issuer := "http://localhost:" + port
	storage.RegisterClients(storage.WebClient("gatehouse-downstream", "downstream-secret", e.base+"/idps/callback"))
	srv := &http.Server{Handler: exampleop.SetupServer(issuer, storage.NewStorage(storage.NewUserStore(issuer)), nil, false)}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })

	idp := e.must("POST", "/management/v1/idps/oidc", e.admin, "", map[string]any{
		"name": "Example OP", "clientId": "gatehouse-downstream", "clientSecret": "downstream-secret", "issuer": issuer,
		"scopes": []string{"openid", "profile", "email"}, "autoRegister": true, "usernameMapping": "OIDC_MAPPING_FIELD_EMAIL",
		"displayNameMapping": "OIDC_MAPPING_FIELD_PREFERRED_USERNAME",
	})["idpId"].(string)
	c := fedBrowser(e.base, issuer)
	p := afGet(t, c, e.authURL("op", "n-op", "scope", "openid profile urn:gatehouse:iam:org:idp:id:"+idp))
	m := regexp.MustCompile(`name="id" value="([^"]+)"`).FindStringSubmatch(p.body)
	if m == nil {
		t.Fatalf("want the example OP's login form; got %d %v:\n%s", p.status, p.loc, p.body)
	}
	req, _ := http.NewRequest("POST", issuer+"/login/username", strings.NewReader(url.Values{
		"id": {m[1]}, "username": {"test-user@localhost"}, "password": {"verysecure"}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	it := e.code(afDo(t, c, req), "op", "n-op")
	u := e.must("GET", "/management/v1/users/"+it.Subject, e.admin, "", nil)["user"].(map[string]any)
	human, _ := u["human"].(map[string]any)
	email, _ := human["email"].(map[string]any)
	profile, _ := human["profile"].(map[string]any)
	if u["userName"] != "test-user@zitadel.ch" || email["email"] != "test-user@zitadel.ch" || profile["displayName"] != "test-user@localhost" {
		t.Errorf("registered user %v; want the OP's e-mail as user name and address, and its preferred_username as display name", u)
	}
}

// Without autoRegister an unknown identity is linked to an existing
// account by its password, or (where the login policy allows registration)
// registered with the claims the user checked; an autoRegister name that
// is taken offers the link.
func TestFederationLinkAndRegister(t *testing.T) {
	e := afStartEnv(t, map[string]string{"GATEHOUSE_IDP_ALLOW_LOOPBACK": "true"})
	up := startUpstream(t, e.base+"/idps/callback")
	idp := e.must("POST", "/management/v1/idps/oidc", e.admin, "", map[string]any{
		"name": "Upstream", "clientId": up.clientID, "clientSecret": up.secret, "issuer": up.issuer,
		"scopes": []string{"openid", "profile", "email"}})["idpId"].(string)
	atUpstream := func(c *http.Client, state string) afPage {
		p := afGet(t, c, e.authURL(state, "n-"+state, "scope", "openid profile urn:gatehouse:iam:org:idp:id:"+idp))
		p = afSubmit(t, c, up.issuer, p, url.Values{"loginName": {"fed"}})
		return afSubmit(t, c, up.issuer, p, url.Values{"password": {"Fed-Passw0rd!1"}})
	}
	before := e.userCount()
	c := fedBrowser(e.base, up.issuer)
	p := atUpstream(c, "k1")
	if !strings.Contains(p.body, "no account of this organization is linked") || strings.Contains(p.body, "/ui/login/idp/register") {
		t.Fatalf("unknown identity without autoRegister: want the link page without registration; got %d %v:\n%s", p.status, p.loc, p.body)
	}
	// A wrong password links nothing.
	if wrong := afSubmit(t, c, e.base, p, url.Values{"loginName": {"alice"}, "password": {"wrong"}, "confirm": {"yes"}}); wrong.status != http.StatusUnauthorized {
		t.Fatalf("link with a wrong password: %d", wrong.status)
	}
	it := e.code(afSubmit(t, c, e.base, p, url.Values{"loginName": {"alice"}, "password": {afPassword}, "confirm": {"yes"}}), "k1", "n-k1")
	if it.Subject != e.users["alice"] || e.userCount() != before {
		t.Fatalf("linked sign-in as %s; want alice, and no new user", it.Subject)
	}
	// The link holds: the next federated sign-in is alice at once.
	if again := e.code(atUpstream(fedBrowser(e.base, up.issuer), "k2"), "k2", "n-k2"); again.Subject != e.users["alice"] {
		t.Errorf("second federated sign-in: %s; want alice", again.Subject)
	}

	// Unlinked again, and registration allowed: the form is prefilled.
	e.must("DELETE", "/management/v1/users/"+e.users["alice"]+"/idps/"+idp+"/"+e.upstreamSubject(t, idp), e.admin, "", nil)
	e.must("POST", "/management/v1/policies/login", e.admin, "", map[string]any{"allowUsernamePassword": true, "allowRegister": true, "allowExternalIdp": true})
	c = fedBrowser(e.base, up.issuer)
	p = atUpstream(c, "k3")
	if !strings.Contains(p.body, `action="/ui/login/idp/register"`) || !strings.Contains(p.body, `value="Fede"`) {
		t.Fatalf("want the registration form prefilled from the claims:\n%s", p.body)
	}
	form := url.Values{"userName": {"fede"}, "firstName": {"Fede"}, "lastName": {"Rated"}, "email": {"fed@upstream.example"}}
	for _, h := range afHiddenRE.FindAllStringSubmatch(p.body, 2) {
		form.Set(h[1], html.UnescapeString(h[2]))
	}
	req, _ := http.NewRequest("POST", e.base+"/ui/login/idp/register", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	fede := e.code(afDo(t, c, req), "k3", "n-k3")
	if fede.Subject == e.users["alice"] || e.userCount() != before+1 {
		t.Fatalf("registered %s; want one new user", fede.Subject)
	}
}

// upstreamSubject is the provided user id of alice's link to idp.
func (e *afEnv) upstreamSubject(t *testing.T, idp string) string {
	t.Helper()
	res, _ := e.must("POST", "/management/v1/users/"+e.users["alice"]+"/idps/_search", e.admin, "", map[string]any{})["result"].([]any)
	for _, r := range res {
		if m := r.(map[string]any); m["idpId"] == idp {
			return m["providedUserId"].(string)
		}
	}
	t.Fatalf("alice has no link to %s", idp)
	return ""
}

// Changes to an identity provider take effect at the next sign-in: a wrong
// client secret (the token endpoint refuses the client), an issuer that
// its discovery document contradicts, deactivation (no button, the
// shortcut fails, a sign-in in flight is refused), reactivation (the
// link still holds) and a new issuer (the links are gone).
func TestFederationChangesTakeEffect(t *testing.T) {
	e := afStartEnv(t, map[string]string{"GATEHOUSE_IDP_ALLOW_LOOPBACK": "true"})
	up := startUpstream(t, e.base+"/idps/callback")
	cfg := map[string]any{"issuer": up.issuer, "clientId": up.clientID, "clientSecret": up.secret,
		"scopes": []string{"openid", "profile", "email"}}
	create := map[string]any{"name": "Upstream", "autoRegister": true}
	for k, v := range cfg {
		create[k] = v
	}
	idp := e.must("POST", "/management/v1/idps/oidc", e.admin, "", create)["idpId"].(string)
	update := func(changes map[string]any) {
		body := map[string]any{}
		for k, v := range cfg {
			body[k] = v
		}
		for k, v := range changes {
			body[k] = v
		}
		e.must("PUT", "/management/v1/idps/"+idp+"/oidc_config", e.admin, "", body)
	}
	shortcut := func(state string) string {
		return e.authURL(state, "n-"+state, "scope", "openid urn:gatehouse:iam:org:idp:id:"+idp)
	}
	// signIn runs the upstream login and returns the page after it.
	signIn := func(state string) afPage {
		c := fedBrowser(e.base, up.issuer)
		p := afGet(t, c, shortcut(state))
		p = afSubmit(t, c, up.issuer, p, url.Values{"loginName": {"fed"}})
		return afSubmit(t, c, up.issuer, p, url.Values{"password": {"Fed-Passw0rd!1"}})
	}
	user := e.code(signIn("c1"), "c1", "n-c1").Subject

	update(map[string]any{"clientSecret": "not-the-secret"})
	afErrorRedirect(t, signIn("c2"), afRedirect, "server_error", "c2", false)
	update(nil)
	if again := e.code(signIn("c3"), "c3", "n-c3").Subject; again != user {
		t.Fatalf("after restoring the secret: %s; want %s", again, user)
	}

	// A sign-in in flight when the provider is deactivated is refused at
	// the callback; the button and the shortcut are gone.
	jar := fedBrowser(e.base, up.issuer).Jar
	stopAtCallback := &http.Client{Jar: jar, CheckRedirect: func(req *http.Request, _ []*http.Request) error {
		if strings.HasPrefix(req.URL.String(), e.base+"/idps/callback") || !strings.HasPrefix(req.URL.String(), e.base) && !strings.HasPrefix(req.URL.String(), up.issuer) {
			return http.ErrUseLastResponse
		}
		return nil
	}}
	p := afGet(t, stopAtCallback, shortcut("c5"))
	p = afSubmit(t, stopAtCallback, up.issuer, p, url.Values{"loginName": {"fed"}})
	p = afSubmit(t, stopAtCallback, up.issuer, p, url.Values{"password": {"Fed-Passw0rd!1"}})
	if p.loc == nil || !strings.HasPrefix(p.loc.String(), e.base+"/idps/callback") {
		t.Fatalf("want the upstream's redirect to the callback; got %d %v", p.status, p.loc)
	}
	e.must("POST", "/management/v1/idps/"+idp+"/_deactivate", e.admin, "", map[string]any{})
	if refused := afGet(t, stopAtCallback, p.loc.String()); refused.status != http.StatusBadRequest || refused.loc != nil {
		t.Errorf("callback of a deactivated provider: %d %v; want the 400 page", refused.status, refused.loc)
	}
	afErrorRedirect(t, afGet(t, fedBrowser(e.base), shortcut("c6")), afRedirect, "invalid_scope", "c6", false)
	if page := afGet(t, fedBrowser(e.base), e.authURL("c7", "n-c7")); strings.Contains(page.body, `name="idpID"`) {
		t.Error("the login page still shows the deactivated provider")
	}
	e.must("POST", "/management/v1/idps/"+idp+"/_reactivate", e.admin, "", map[string]any{})
	if again := e.code(signIn("c8"), "c8", "n-c8").Subject; again != user {
		t.Errorf("after reactivation: %s; want the linked %s", again, user)
	}

	// The issuer its discovery document contradicts (the same server by
	// another name) is refused before any redirect.
	update(map[string]any{"issuer": strings.Replace(up.issuer, "localhost", "127.0.0.1", 1)})
	if p := afGet(t, fedBrowser(e.base, up.issuer), shortcut("c4")); p.status != http.StatusBadGateway {
		t.Errorf("issuer mismatch: %d %v; want the 502 page", p.status, p.loc)
	}
	// Another issuer is another provider: the links went with the old one,
	// also when the issuer is changed back (the user's name is taken, so
	// the identity is offered the link page).
	update(nil)
	if p := signIn("c9"); p.loc != nil || !strings.Contains(p.body, "exists already") {
		t.Errorf("after an issuer round trip: %d %v; want the link page, the link gone", p.status, p.loc)
	}
}

// In the distributed deployment authn drives the flow and directory owns
// the providers and links, over Connect: a federated sign-in through edge
// registers the user and gets tokens.
func TestFederationDistributed(t *testing.T) {
	d := startDistributed(t, testutil.RedisURL(t))
	_, tok := operatorToken(t, d.edge.base, d.directoryData, d.issuer)
	admin := tok["access_token"].(string)
	status, proj := restJSON(t, "POST", d.edge.base+"/management/v1/projects", admin, map[string]any{"name": "Fed"})
	if status != 200 {
		t.Fatalf("AddProject: %d %v", status, proj)
	}
	status, app := restJSON(t, "POST", d.edge.base+"/management/v1/projects/"+proj["id"].(string)+"/apps/oidc", admin, map[string]any{
		"name": "fed-web", "redirectUris": []string{afRedirect}, "responseTypes": []string{"OIDC_RESPONSE_TYPE_CODE"},
		"grantTypes": []string{"OIDC_GRANT_TYPE_AUTHORIZATION_CODE"}, "appType": "OIDC_APP_TYPE_WEB", "authMethodType": "OIDC_AUTH_METHOD_TYPE_BASIC"})
	if status != 200 {
		t.Fatalf("AddOIDCApp: %d %v", status, app)
	}
	up := startUpstream(t, d.issuer+"/idps/callback")
	status, idp := restJSON(t, "POST", d.edge.base+"/management/v1/idps/oidc", admin, map[string]any{
		"name": "Upstream", "clientId": up.clientID, "clientSecret": up.secret, "issuer": up.issuer,
		"scopes": []string{"openid", "profile", "email"}, "autoRegister": true})
	if status != 200 {
		t.Fatalf("AddOrgOIDCIDP: %d %v", status, idp)
	}
	c := fedBrowser(d.issuer, up.issuer)
	p := afGet(t, c, d.issuer+"/oauth/v2/authorize?"+url.Values{"client_id": {app["clientId"].(string)}, "redirect_uri": {afRedirect},
		"response_type": {"code"}, "state": {"ds"}, "nonce": {"n-ds"},
		"scope": {"openid urn:gatehouse:iam:org:idp:id:" + idp["idpId"].(string)}}.Encode())
	p = afSubmit(t, c, up.issuer, p, url.Values{"loginName": {"fed"}})
	p = afSubmit(t, c, up.issuer, p, url.Values{"password": {"Fed-Passw0rd!1"}})
	if p.loc == nil || p.loc.Query().Get("code") == "" || p.loc.Query().Get("state") != "ds" {
		t.Fatalf("want a code for the client; got %d %v:\n%s", p.status, p.loc, p.body)
	}
	status, found := restJSON(t, "POST", d.edge.base+"/management/v1/users/_search", admin, map[string]any{"queries": []any{
		map[string]any{"userNameQuery": map[string]any{"userName": "fed@", "method": "TEXT_QUERY_METHOD_STARTS_WITH"}}}})
	if res, _ := found["result"].([]any); status != 200 || len(res) != 1 {
		t.Errorf("the registered user: %d %v", status, found)
	}
}
