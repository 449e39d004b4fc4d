package e2e

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"

	adminv1 "github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/admin/v1"
	"github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/admin/v1/adminv1connect"
	"github.com/gatehouse-id/gatehouse/pkg/rpc"
	"github.com/gatehouse-id/gatehouse/services/tokens/scope"
)

// The findings of the trust review (issue 10), each replayed through the
// public interfaces of a real embedded server: the request that worked
// before must now fail as it should, and the legitimate use beside it
// must keep working.

const (
	mgmtAudScope = "urn:gatehouse:iam:org:project:id:gatehouse:aud"
	orgScope     = "urn:gatehouse:iam:org:id:"
)

func projectAudScope(id string) string { return "urn:gatehouse:iam:org:project:id:" + id + ":aud" }

// call is a management REST call with an optional x-service-orgid.
func (e *afEnv) call(method, path, token, org string, body any) (int, map[string]any) {
	e.t.Helper()
	return restJSONOrg(e.t, method, e.base+path, token, org, body)
}

// must is call that expects 200.
func (e *afEnv) must(method, path, token, org string, body any) map[string]any {
	e.t.Helper()
	status, m := e.call(method, path, token, org, body)
	if status != 200 {
		e.t.Fatalf("%s %s: %d %v", method, path, status, m)
	}
	return m
}

func (e *afEnv) homeOrg() string {
	e.t.Helper()
	org, _ := e.must("GET", "/management/v1/orgs/me", e.admin, "", nil)["org"].(map[string]any)
	return org["id"].(string)
}

// machine creates a machine user in org with a JSON key, grants it roles
// there (if any) and returns its id and the JWT-profile token response for
// scope.
func (e *afEnv) machine(org, name string, roles []string, scope string) (string, int, map[string]any) {
	e.t.Helper()
	id := e.must("POST", "/management/v1/users/machine", e.admin, org, map[string]any{
		"userName": name, "name": name, "accessTokenType": "ACCESS_TOKEN_TYPE_JWT"})["userId"].(string)
	key := e.must("POST", "/management/v1/users/"+id+"/keys", e.admin, org, map[string]any{"type": "KEY_TYPE_JSON"})
	raw, err := base64.StdEncoding.DecodeString(key["keyDetails"].(string))
	if err != nil {
		e.t.Fatal(err)
	}
	var kf keyFile
	if err := json.Unmarshal(raw, &kf); err != nil {
		e.t.Fatal(err)
	}
	if len(roles) > 0 {
		e.must("POST", "/management/v1/orgs/me/members", e.admin, org, map[string]any{"userId": id, "roles": roles})
	}
	status, tok := postForm(e.t, e.base+"/oauth/v2/token", url.Values{
		"grant_type": {"urn:ietf:params:oauth:grant-type:jwt-bearer"},
		"assertion":  {jwtProfileAssertion(e.t, kf, e.base)},
		"scope":      {scope},
	})
	return id, status, tok
}

// managementToken is machine for a management token that must be issued.
func (e *afEnv) managementToken(org, name string, roles ...string) (string, string) {
	e.t.Helper()
	id, status, tok := e.machine(org, name, roles, "openid "+mgmtAudScope)
	access, _ := tok["access_token"].(string)
	if status != 200 || access == "" {
		e.t.Fatalf("management token for %s: %d %v", name, status, tok)
	}
	return id, access
}

// foreignApp is a web app of another organization.
type foreignApp struct {
	oauth2.Config
	projectID, appID string
}

// foreignOrg creates an organization with a project and a code-flow web
// app (redirecting to afRedirect) and returns the org id and the app.
func (e *afEnv) foreignOrg(name string) (string, foreignApp) {
	e.t.Helper()
	org := e.must("POST", "/management/v1/orgs", e.admin, "", map[string]any{"name": name})["id"].(string)
	proj := e.must("POST", "/management/v1/projects", e.admin, org, map[string]any{"name": name + " app"})["id"].(string)
	app := e.must("POST", "/management/v1/projects/"+proj+"/apps/oidc", e.admin, org, map[string]any{
		"name": "evil-web", "redirectUris": []string{afRedirect},
		"responseTypes": []string{"OIDC_RESPONSE_TYPE_CODE"},
		"grantTypes":    []string{"OIDC_GRANT_TYPE_AUTHORIZATION_CODE", "OIDC_GRANT_TYPE_REFRESH_TOKEN"},
		"appType":       "OIDC_APP_TYPE_WEB", "authMethodType": "OIDC_AUTH_METHOD_TYPE_BASIC",
	})
	return org, foreignApp{Config: oauth2.Config{ClientID: app["clientId"].(string), ClientSecret: app["clientSecret"].(string),
		Endpoint: e.provider.Endpoint(), RedirectURL: afRedirect}, projectID: proj, appID: app["appId"].(string)}
}

// authorize opens cfg's authorization URL for scopes in browser c.
func (e *afEnv) authorize(c *http.Client, cfg oauth2.Config, scopes []string, prompt string) afPage {
	e.t.Helper()
	cfg.Scopes = scopes
	opts := []oauth2.AuthCodeOption{oidc.Nonce("n")}
	if prompt != "" {
		opts = append(opts, oauth2.SetAuthURLParam("prompt", prompt))
	}
	return afGet(e.t, c, cfg.AuthCodeURL("st", opts...))
}

// Finding 1 (critical): an org owner's app silently signed the IAM owner
// in with prompt=none, the default org's scope and the management
// audience, and the token administered the instance.
func TestSecurityCrossTenantSilentLogin(t *testing.T) {
	e := afStart(t)
	home := e.homeOrg()
	c := browser(t, e.base)
	// The victim is the instance's human IAM owner, signed in to Gatehouse.
	e.signIn(c, "admin", "Admin-Passw0rd-for-e2e", "s1")
	_, evil := e.foreignOrg("Evil Corp")

	for _, scopes := range [][]string{
		{"openid", orgScope + home, mgmtAudScope, "offline_access"}, // the original request
		{"openid", orgScope + home},
		{"openid", mgmtAudScope},
	} {
		for _, prompt := range []string{"none", ""} {
			p := e.authorize(c, evil.Config, scopes, prompt)
			afErrorRedirect(t, p, afRedirect, "invalid_scope", "st", false)
		}
	}
	// Without a reserved scope the foreign app finds no session of its own
	// organization's users: the IAM owner's session does not answer it.
	afErrorRedirect(t, e.authorize(c, evil.Config, []string{"openid"}, "none"), afRedirect, "login_required", "st", false)

	// An ordinary app of alice's own organization cannot ask for the
	// management audience either.
	p := e.authorize(c, e.web, []string{"openid", mgmtAudScope}, "")
	afErrorRedirect(t, p, afRedirect, "invalid_scope", "st", false)
	// Every authorization response names its issuer (RFC 9207, mix-up).
	if iss := p.loc.Query().Get("iss"); iss != e.base {
		t.Errorf("iss %q in the authorization response; want %q", iss, e.base)
	}
}

// Admin clients: only an IAM owner marks one; it signs in users of every
// organization, never silently with the management audience (also a
// confidential one: the confirmation page), and what the token may do is
// decided by the user's roles.
func TestSecurityAdminClient(t *testing.T) {
	e := afStart(t)
	evilOrg, evil := e.foreignOrg("Evil Corp")
	_, owner := e.managementToken(evilOrg, "evil-owner", "ORG_OWNER")
	if status, m := e.call("POST", "/management/v1/projects/"+evil.projectID+"/apps/"+evil.appID+"/_admin_client", owner, evilOrg,
		map[string]any{"adminClient": true}); status != http.StatusForbidden {
		t.Fatalf("an org owner marks its own app as admin client: %d %v; want 403", status, m)
	}
	marked := e.must("POST", "/management/v1/projects/"+e.projectID+"/apps/"+e.webAppID+"/_admin_client", e.admin, "", map[string]any{"adminClient": true})
	e.web.ClientSecret, _ = marked["clientSecret"].(string) // marking replaced it
	e.must("POST", "/management/v1/users/human", e.admin, evilOrg, map[string]any{
		"userName": "eve", "profile": map[string]any{"firstName": "Eve", "lastName": "Evil"},
		"email": map[string]any{"email": "eve@example.org"}, "initialPassword": "Eve-Passw0rd!1"})

	c := browser(t, e.base)
	e.signIn(c, "alice", afPassword, "s1")
	// Never silently.
	afErrorRedirect(t, e.authorize(c, e.web, []string{"openid", mgmtAudScope}, "none"), afRedirect, "invalid_scope", "st", false)
	// Interactively the admin client gets the management audience once
	// the person confirms it (a confidential client too: any page can
	// navigate a browser to its request), and alice, who holds no role,
	// can do nothing with it.
	cfg := e.web
	cfg.Scopes = []string{"openid", mgmtAudScope}
	p := e.authorize(c, e.web, cfg.Scopes, "")
	if p.loc != nil || !afIs(p, "decision") || !strings.Contains(p.body, "Administer Gatehouse") {
		t.Fatalf("confidential admin client with a session: %d %v; want the confirmation page", p.status, p.loc)
	}
	p = afSubmit(t, c, e.base, p, url.Values{"decision": {"accept"}})
	if p.loc == nil || p.loc.Query().Get("code") == "" {
		t.Fatalf("admin client, confirmed: %d %v; want a code", p.status, p.loc)
	}
	tok, err := cfg.Exchange(e.ctx, p.loc.Query().Get("code"))
	if err != nil {
		t.Fatal(err)
	}
	if status, m := e.call("GET", "/management/v1/orgs/me", tok.AccessToken, "", nil); status != http.StatusForbidden {
		t.Errorf("alice (no role) with an admin client's token: %d %v; want 403", status, m)
	}
	// It signs in users of another organization.
	c2 := browser(t, e.base)
	p = e.password(c2, e.authorize(c2, e.web, []string{"openid", orgScope + evilOrg}, ""), "eve", "Eve-Passw0rd!1")
	if !afIs(p, "newPassword") {
		t.Fatalf("eve of another org on the admin client: want her password change page; got %d %v", p.status, p.loc)
	}
}

// Finding 2: the project-audience scope accepted any string: another
// client's id, an unknown id, or the management API's.
func TestSecurityAudienceInjection(t *testing.T) {
	e := afStart(t)
	home := e.homeOrg()
	otherOrg, _ := e.foreignOrg("Other Corp")
	otherProject := e.must("POST", "/management/v1/projects", e.admin, otherOrg, map[string]any{"name": "theirs"})["id"].(string)
	for name, aud := range map[string]string{
		"another client's id":      e.web.ClientID,
		"an unknown id":            "no-such-project",
		"another org's project id": otherProject,
	} {
		_, status, tok := e.machine(home, "robot-"+strings.ReplaceAll(name, " ", "-")[:12], nil, "openid "+projectAudScope(aud))
		if status != http.StatusBadRequest || tok["error"] != "invalid_scope" {
			t.Errorf("%s in the audience scope: %d %v; want 400 invalid_scope", name, status, tok)
		}
	}
	// The client's own organization's project is a valid audience.
	_, status, tok := e.machine(home, "robot-own", nil, "openid "+projectAudScope(e.projectID))
	if status != 200 {
		t.Fatalf("own project audience: %d %v", status, tok)
	}
	// An ordinary app cannot target another client or the management API.
	c := browser(t, e.base)
	e.signIn(c, "alice", afPassword, "s1")
	for _, aud := range []string{e.implicitID, "gatehouse", "no-such-project"} {
		afErrorRedirect(t, e.authorize(c, e.web, []string{"openid", projectAudScope(aud)}, ""), afRedirect, "invalid_scope", "st", false)
	}
}

// Finding 3: an ORG_USER_MANAGER added a key to bootstrap-admin (IAM_OWNER)
// and reset the human admin's password.
func TestSecurityRoleDominance(t *testing.T) {
	e := afStart(t)
	home := e.homeOrg()
	_, manager := e.managementToken(home, "user-manager", "ORG_USER_MANAGER")
	_, owner := e.managementToken(home, "org-owner", "ORG_OWNER")
	peerID, _ := e.managementToken(home, "peer-manager", "ORG_USER_MANAGER")
	bootstrap := e.lookupUser("bootstrap-admin")
	admin := e.lookupUser("admin")

	for _, tc := range []struct {
		name, method, path string
		body               any
	}{
		{"machine key for bootstrap-admin", "POST", "/management/v1/users/" + bootstrap + "/keys", map[string]any{"type": "KEY_TYPE_JSON"}},
		{"secret for bootstrap-admin", "PUT", "/management/v1/users/" + bootstrap + "/secret", map[string]any{}},
		{"admin's password", "POST", "/management/v1/users/" + admin + "/password", map[string]any{"password": "Taken-Over-1!", "noChangeRequired": true}},
		{"deactivate admin", "POST", "/management/v1/users/" + admin + "/_deactivate", map[string]any{}},
		{"admin's metadata", "POST", "/management/v1/users/" + admin + "/metadata/k", map[string]any{"value": "dg=="}},
		{"remove bootstrap-admin", "DELETE", "/management/v1/users/" + bootstrap, nil},
	} {
		for who, tok := range map[string]string{"ORG_USER_MANAGER": manager, "ORG_OWNER": owner} {
			if status, m := e.call(tc.method, tc.path, tok, "", tc.body); status != http.StatusForbidden {
				t.Errorf("%s by an %s: %d %v; want 403", tc.name, who, status, m)
			}
		}
	}
	// A manager may not change an org owner, and may not grant roles.
	ownerID := e.lookupUser("org-owner")
	if status, m := e.call("POST", "/management/v1/users/"+ownerID+"/keys", manager, "", map[string]any{"type": "KEY_TYPE_JSON"}); status != http.StatusForbidden {
		t.Errorf("manager adds a key to an org owner: %d %v; want 403", status, m)
	}
	// An org owner grants only org roles it holds, and never changes the
	// memberships of an IAM owner.
	if status, m := e.call("POST", "/management/v1/orgs/me/members", owner, "", map[string]any{"userId": bootstrap, "roles": []string{"ORG_USER_MANAGER"}}); status != http.StatusForbidden {
		t.Errorf("org owner adds bootstrap-admin as a member: %d %v; want 403", status, m)
	}
	// What they hold, they may do.
	e.must("POST", "/management/v1/users/"+e.users["alice"]+"/password", manager, "", map[string]any{"password": "Alice-Changed-1!", "noChangeRequired": true})
	e.must("POST", "/management/v1/users/"+peerID+"/metadata/k", manager, "", map[string]any{"value": "dg=="})
	e.must("POST", "/management/v1/orgs/me/members", owner, "", map[string]any{"userId": e.users["bob"], "roles": []string{"ORG_USER_MANAGER"}})
}

// lookupUser finds a user of the home organization by user name.
func (e *afEnv) lookupUser(name string) string {
	e.t.Helper()
	res := e.must("POST", "/management/v1/users/_search", e.admin, "", map[string]any{"queries": []any{
		map[string]any{"userNameQuery": map[string]any{"userName": name, "method": "TEXT_QUERY_METHOD_EQUALS"}}}})
	list, _ := res["result"].([]any)
	if len(list) != 1 {
		e.t.Fatalf("user %s: %v", name, res)
	}
	return list[0].(map[string]any)["id"].(string)
}

// userinfoStatus is the status userinfo answers the bearer token with.
func (e *afEnv) userinfoStatus(token string) int {
	e.t.Helper()
	req, _ := http.NewRequest("GET", e.base+"/oidc/v1/userinfo", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	res.Body.Close()
	return res.StatusCode
}

// Finding 4: user names were unique case-sensitively but looked up
// case-insensitively, so "ALICE" (or bob's e-mail as a user name) blocked
// the real user's login for good.
func TestSecurityLoginNameSquatting(t *testing.T) {
	e := afStart(t)
	domain := e.must("GET", "/management/v1/orgs/me", e.admin, "", nil)["org"].(map[string]any)["primaryDomain"].(string)
	// Issue 24, finding 12: alice's login name as a user name, and names
	// that differ from hers only by invisible characters.
	for _, name := range []string{"ALICE", "Alice", "ａｌｉｃｅ", "bob@example.com", "alice@" + domain, "Alice@" + strings.ToUpper(domain),
		"ali\u200bce", "alice\u00ad", "\u2066alice", "alice\ufe0f", "\u3164alice"} {
		status, m := e.call("POST", "/management/v1/users/human", e.admin, "", map[string]any{
			"userName": name, "profile": map[string]any{"firstName": "M", "lastName": "Allory"},
			"email": map[string]any{"email": "mallory@example.org"}, "initialPassword": "Mallory-Passw0rd!"})
		if status != http.StatusConflict && status != http.StatusBadRequest {
			t.Errorf("user name %q beside alice and bob: %d %v; want 409 (taken) or 400 (invisible characters)", name, status, m)
		}
	}
	// And the reverse: a user named with carol's future login name keeps
	// "carol" from being a user name.
	e.must("POST", "/management/v1/users/human", e.admin, "", map[string]any{"userName": "carol@" + domain,
		"profile": map[string]any{"firstName": "C", "lastName": "Arol"}, "email": map[string]any{"email": "carol@example.org"}, "initialPassword": "Carol-Passw0rd!1"})
	if status, m := e.call("POST", "/management/v1/users/human", e.admin, "", map[string]any{"userName": "carol",
		"profile": map[string]any{"firstName": "C", "lastName": "Arol"}, "email": map[string]any{"email": "carol2@example.org"}, "initialPassword": "Carol-Passw0rd!1"}); status != http.StatusConflict {
		t.Errorf("user name carol beside a user named carol@%s: %d %v; want 409", domain, status, m)
	}
	// Logins are exact on the normalised form: any case finds alice, and
	// bob's verified e-mail finds bob.
	for login, who := range map[string]string{"ALICE": "alice", "Alice": "alice", "bob@example.com": "bob"} {
		c := browser(t, e.base)
		pass := map[string]string{"alice": afPassword, "bob": afBobPass}[who]
		it := e.code(e.password(c, afGet(t, c, e.authURL("sq", "n-sq")), login, pass), "sq", "n-sq")
		if it.Subject != e.users[who] {
			t.Errorf("login %q signed in %s; want %s", login, it.Subject, who)
		}
	}
}

// Findings 6 and 7: a deactivated user's tokens stayed active, and an
// admin password reset left sessions, refresh and access tokens working.
func TestSecurityStateChangesCutAccess(t *testing.T) {
	e := afStart(t)
	home := e.homeOrg()
	offline := e.web
	offline.Scopes = []string{"openid", "profile", "offline_access"}

	userinfo := e.userinfoStatus
	signIn := func(c *http.Client, user, pass string) *oauth2.Token {
		p := e.password(c, afGet(t, c, offline.AuthCodeURL("st", oidc.Nonce("n"))), user, pass)
		if p.loc == nil || p.loc.Query().Get("code") == "" {
			t.Fatalf("sign-in of %s: %d %v", user, p.status, p.loc)
		}
		tok, err := offline.Exchange(e.ctx, p.loc.Query().Get("code"))
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}

	t.Run("deactivation", func(t *testing.T) {
		c := browser(t, e.base)
		tok := signIn(c, "alice", afPassword)
		robotID, robot := e.managementToken(home, "robot-deact")
		if !e.active(tok.AccessToken) || userinfo(tok.AccessToken) != 200 {
			t.Fatal("alice's token does not work before deactivation")
		}
		e.must("POST", "/management/v1/users/"+e.users["alice"]+"/_deactivate", e.admin, "", map[string]any{})
		e.must("POST", "/management/v1/users/"+robotID+"/_deactivate", e.admin, "", map[string]any{})
		if e.active(tok.AccessToken) || userinfo(tok.AccessToken) != http.StatusUnauthorized {
			t.Error("a deactivated user's access token still works")
		}
		if status, _ := e.call("GET", "/management/v1/orgs/me", robot, "", nil); status != http.StatusUnauthorized {
			t.Errorf("a deactivated machine user's token on the management API: %d; want 401", status)
		}
		if _, err := offline.TokenSource(e.ctx, &oauth2.Token{RefreshToken: tok.RefreshToken}).Token(); err == nil {
			t.Error("a deactivated user's refresh token still works")
		}
		// Reactivation does not bring the old tokens back.
		e.must("POST", "/management/v1/users/"+e.users["alice"]+"/_reactivate", e.admin, "", map[string]any{})
		if e.active(tok.AccessToken) {
			t.Error("reactivation revived a revoked token")
		}
		afErrorRedirect(t, afGet(t, c, offline.AuthCodeURL("st", oidc.Nonce("n"), oauth2.SetAuthURLParam("prompt", "none"))),
			afRedirect, "login_required", "st", false)
		// Tokens are revoked up to the whole second of the cut (iat has
		// second resolution); a later login gets a working token.
		time.Sleep(1100 * time.Millisecond)
		fresh := signIn(browser(t, e.base), "alice", afPassword)
		if !e.active(fresh.AccessToken) {
			t.Error("a token issued after reactivation is not active")
		}
	})

	t.Run("machine user deactivated while its client is cached", func(t *testing.T) {
		id := e.must("POST", "/management/v1/users/machine", e.admin, "", map[string]any{"userName": "cc-robot", "name": "CC",
			"accessTokenType": "ACCESS_TOKEN_TYPE_JWT"})["userId"].(string)
		sec := e.must("PUT", "/management/v1/users/"+id+"/secret", e.admin, "", map[string]any{})
		cc := clientcredentials.Config{ClientID: sec["clientId"].(string), ClientSecret: sec["clientSecret"].(string),
			TokenURL: e.base + "/oauth/v2/token", Scopes: []string{"openid"}}
		if _, err := cc.Token(e.ctx); err != nil { // the token endpoint now caches the client
			t.Fatal(err)
		}
		e.must("POST", "/management/v1/users/"+id+"/_deactivate", e.admin, "", map[string]any{})
		if _, err := cc.Token(e.ctx); err == nil {
			t.Error("a deactivated machine user got a token from the cached client")
		}
	})

	t.Run("admin password reset", func(t *testing.T) {
		c := browser(t, e.base)
		tok := signIn(c, "bob", afBobPass)
		e.must("POST", "/management/v1/users/"+e.users["bob"]+"/password", e.admin, "", map[string]any{"password": "Reset-Passw0rd!"})
		if e.active(tok.AccessToken) || userinfo(tok.AccessToken) != http.StatusUnauthorized {
			t.Error("an access token survived the admin's password reset")
		}
		if _, err := offline.TokenSource(e.ctx, &oauth2.Token{RefreshToken: tok.RefreshToken}).Token(); err == nil {
			t.Error("a refresh token survived the admin's password reset")
		}
		// The session ended: no silent login, and the next login must
		// change the password.
		afErrorRedirect(t, afGet(t, c, offline.AuthCodeURL("st", oidc.Nonce("n"), oauth2.SetAuthURLParam("prompt", "none"))),
			afRedirect, "login_required", "st", false)
		p := e.password(c, afGet(t, c, offline.AuthCodeURL("st", oidc.Nonce("n"))), "bob", "Reset-Passw0rd!")
		if !afIs(p, "newPassword") {
			t.Fatalf("after the reset: want the password change page; got %d %v", p.status, p.loc)
		}
	})
}

// Finding 5: anyone could register into any organization chosen by the
// org scope. Registration is now off unless the organization's login
// policy allows it, and the org scope only selects organizations whose
// users the app signs in.
func TestSecuritySelfRegistration(t *testing.T) {
	e := afStart(t)
	c := browser(t, e.base)
	p := afGet(t, c, e.authURL("cr", "n-cr", "prompt", "create"))
	if afIs(p, "userName") || !afIs(p, "loginName") || strings.Contains(p.body, "/ui/login/register") {
		t.Fatalf("prompt=create under the default policy: want the login page without registration; got %d:\n%s", p.status, p.body)
	}
	rid := p.body[strings.Index(p.body, `name="authRequestID" value="`)+len(`name="authRequestID" value="`):]
	rid = rid[:strings.Index(rid, `"`)]
	form := afGet(t, c, e.base+"/ui/login/register?authRequestID="+rid)
	if afIs(form, "userName") {
		t.Fatal("the registration form is served although registration is off")
	}
	// A forged post of the form is refused and creates nothing.
	req, _ := http.NewRequest("POST", e.base+"/ui/login/register", strings.NewReader(url.Values{
		"authRequestID": {rid}, "csrf": {afCSRF(p.body)}, "userName": {"mallory"}, "firstName": {"M"}, "lastName": {"A"},
		"email": {"m@example.org"}, "password": {"Mallory-Passw0rd!"}, "confirmPassword": {"Mallory-Passw0rd!"}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if res := afDo(t, c, req); res.status != http.StatusForbidden {
		t.Errorf("registration posted under the default policy: %d; want 403", res.status)
	}
	status, list := e.call("POST", "/management/v1/users/_search", e.admin, "", map[string]any{"queries": []any{
		map[string]any{"userNameQuery": map[string]any{"userName": "mallory", "method": "TEXT_QUERY_METHOD_EQUALS"}}}})
	if status != 200 || list["result"] != nil {
		t.Errorf("users named mallory: %d %v; want none", status, list)
	}
}

// afCSRF returns the CSRF token of a login page's form.
func afCSRF(body string) string {
	const marker = `name="csrf" value="`
	i := strings.Index(body, marker)
	if i < 0 {
		return ""
	}
	v := body[i+len(marker):]
	return v[:strings.Index(v, `"`)]
}

// Project grants: an app signs in users of another organization only once
// its project is granted there, and each such user consents first; a
// removed grant cuts what was issued under it (issue 24, finding 7).
func TestSecurityProjectGrant(t *testing.T) {
	e := afStart(t)
	partner, _ := e.foreignOrg("Partner Corp")
	e.must("POST", "/management/v1/users/human/_import", e.admin, partner, map[string]any{
		"userName": "pat", "profile": map[string]any{"firstName": "Pat", "lastName": "Partner"},
		"email": map[string]any{"email": "pat@partner.example"}, "password": "Pat-Passw0rd!1"})
	c := browser(t, e.base)
	scopes := []string{"openid", "offline_access", orgScope + partner}
	cfg := e.web
	cfg.Scopes = scopes
	afErrorRedirect(t, e.authorize(c, e.web, scopes, ""), afRedirect, "invalid_scope", "st", false)

	grant := e.must("POST", "/management/v1/projects/"+e.projectID+"/grants", e.admin, "", map[string]any{"grantedOrgId": partner})["grantId"].(string)
	p := e.password(c, e.authorize(c, e.web, scopes, ""), "pat", "Pat-Passw0rd!1")
	if !strings.Contains(p.body, `name="decision"`) {
		t.Fatalf("pat of the granted org: want the consent page; got %d %v:\n%s", p.status, p.loc, p.body)
	}
	p = afSubmit(t, c, e.base, p, url.Values{"decision": {"accept"}})
	if p.loc == nil || p.loc.Query().Get("code") == "" {
		t.Fatalf("after consent: %d %v; want a code", p.status, p.loc)
	}
	tok, err := cfg.Exchange(e.ctx, p.loc.Query().Get("code"))
	if err != nil {
		t.Fatal(err)
	}
	userinfo := e.userinfoStatus
	if !e.active(tok.AccessToken) || userinfo(tok.AccessToken) != http.StatusOK {
		t.Fatal("the partner user's access token does not work under the grant")
	}
	// A code issued under the grant and not yet redeemed.
	p = e.authorize(c, e.web, scopes, "")
	if p.loc == nil || p.loc.Query().Get("code") == "" {
		t.Fatalf("second request, consent remembered: %d %v; want a code", p.status, p.loc)
	}
	pending := p.loc.Query().Get("code")

	// Removing the grant is a cut: the refresh token, the access token
	// (introspection and userinfo, at once) and the unused code stop.
	e.must("DELETE", "/management/v1/projects/"+e.projectID+"/grants/"+grant, e.admin, "", nil)
	if _, err := cfg.TokenSource(e.ctx, &oauth2.Token{RefreshToken: tok.RefreshToken}).Token(); err == nil {
		t.Error("a refresh token of a partner user still works after the grant was removed")
	}
	if e.active(tok.AccessToken) {
		t.Error("the partner user's access token introspects active after the grant was removed")
	}
	if status := userinfo(tok.AccessToken); status != http.StatusUnauthorized {
		t.Errorf("userinfo with the partner user's access token after the grant was removed: %d; want 401", status)
	}
	if _, err := cfg.Exchange(e.ctx, pending); err == nil || !strings.Contains(err.Error(), "invalid_grant") {
		t.Errorf("a code issued under the removed grant: %v; want invalid_grant", err)
	}
	afErrorRedirect(t, e.authorize(c, e.web, scopes, ""), afRedirect, "invalid_scope", "st", false)
}

// Finding 9: any org admin could mark any address verified, and every app
// accepted users of every org, so a foreign tenant's user presented a
// "verified" alice@example.com. Apps now sign in only their own (and
// granted) organizations' users, and an admin-set verification counts
// only within a domain the organization verified; an IAM owner's counts
// everywhere.
func TestSecurityEmailVerified(t *testing.T) {
	e := afStartEnv(t, nil)
	home := e.homeOrg()
	_, orgOwner := e.managementToken(home, "owner-bot", "ORG_OWNER")
	domain, _ := e.must("GET", "/management/v1/orgs/me", e.admin, "", nil)["org"].(map[string]any)["primaryDomain"].(string)
	add := func(name, addr string) {
		e.must("POST", "/management/v1/users/human/_import", orgOwner, "", map[string]any{"userName": name,
			"profile": map[string]any{"firstName": name, "lastName": "Marked"},
			"email":   map[string]any{"email": addr, "isEmailVerified": true}, "password": afPassword})
	}
	// An organization owner's mark outside the organization's verified
	// domains is its word only: reported unverified.
	add("marked", "marked@example.com")
	if addr, ok := e.emailClaims("marked", afPassword, "m1"); addr != "marked@example.com" || ok {
		t.Errorf("userinfo email %q verified %v; want marked@example.com unverified (example.com is not the organization's)", addr, ok)
	}
	// Inside its own (generated, verified) domain it counts.
	add("inside", "inside@"+domain)
	if addr, ok := e.emailClaims("inside", afPassword, "m2"); addr != "inside@"+domain || !ok {
		t.Errorf("userinfo email %q verified %v; want verified within the organization's domain", addr, ok)
	}
	// An IAM owner's mark is proof anywhere.
	e.user("iammarked", afPassword, false)
	if addr, ok := e.emailClaims("iammarked", afPassword, "m3"); addr != "iammarked@example.com" || !ok {
		t.Errorf("userinfo email %q verified %v; want an IAM owner's mark verified", addr, ok)
	}
}

// The reserved-scope table (pkg/scope.Rules), replayed through the public
// endpoints for every client kind: a machine user at the token endpoint
// (JWT profile), an ordinary app and an admin app at the authorization
// endpoint (interactive and with prompt=none), each asking for every
// reserved family with an id of its own organization and of another.
func TestSecurityReservedScopeTable(t *testing.T) {
	e := afStart(t)
	home := e.homeOrg()
	otherOrg, _ := e.foreignOrg("Table Corp")
	otherProject := e.must("POST", "/management/v1/projects", e.admin, otherOrg, map[string]any{"name": "their project"})["id"].(string)
	admin := e.app(map[string]any{
		"name": "table-admin", "redirectUris": []string{afRedirect},
		"responseTypes": []string{"OIDC_RESPONSE_TYPE_CODE"}, "grantTypes": []string{"OIDC_GRANT_TYPE_AUTHORIZATION_CODE"},
		"appType": "OIDC_APP_TYPE_WEB", "authMethodType": "OIDC_AUTH_METHOD_TYPE_BASIC"})
	e.must("POST", "/management/v1/projects/"+e.projectID+"/apps/"+admin["appId"].(string)+"/_admin_client", e.admin, "", map[string]any{"adminClient": true})
	adminCfg := oauth2.Config{ClientID: admin["clientId"].(string), ClientSecret: admin["clientSecret"].(string),
		Endpoint: e.provider.Endpoint(), RedirectURL: afRedirect}

	type probe struct {
		family scope.Reserved
		scope  string
		own    bool
	}
	probes := []probe{
		{scope.ReservedManagement, mgmtAudScope, true},
		{scope.ReservedProject, projectAudScope(e.projectID), true},
		{scope.ReservedProject, projectAudScope(otherProject), false},
		{scope.ReservedOrg, orgScope + home, true},
		{scope.ReservedOrg, orgScope + otherOrg, false},
	}
	allowed := func(kind scope.Kind, p probe, noInteraction bool) bool {
		switch scope.RuleFor(kind, p.family) {
		case scope.Always:
			return true
		case scope.Interactive:
			return !noInteraction
		case scope.OwnOrg, scope.OwnOrGranted:
			return p.own // no grants here
		}
		return false
	}
	c := browser(t, e.base)
	e.signIn(c, "alice", afPassword, "s1")
	n := 0
	for _, p := range probes {
		// Machine users, for themselves.
		n++
		_, status, tok := e.machine(home, fmt.Sprintf("table-robot-%d", n), nil, "openid "+p.scope)
		if want := allowed(scope.MachineUser, p, false); (status == 200) != want {
			t.Errorf("machine user asks for %s: %d %v; allowed %v", p.scope, status, tok, want)
		}
		for kind, cfg := range map[scope.Kind]oauth2.Config{scope.App: e.web, scope.AdminApp: adminCfg} {
			for _, none := range []bool{false, true} {
				prompt := ""
				if none {
					prompt = "none"
				}
				page := e.authorize(c, cfg, []string{"openid", p.scope}, prompt)
				refused := page.loc != nil && page.loc.Query().Get("error") == "invalid_scope"
				if want := allowed(kind, p, none); refused == want {
					t.Errorf("%s asks for %s (prompt=%q): refused %v; allowed %v (%d %v)", kind, p.scope, prompt, refused, want, page.status, page.loc)
				}
			}
		}
	}
}

// The admin API (key rotation, instance-wide) for each caller kind over
// REST, Connect, gRPC and gRPC-web: only an IAM owner.
func TestSecurityAdminAPIMatrix(t *testing.T) {
	e := afStart(t)
	home := e.homeOrg()
	_, owner := e.managementToken(home, "admin-api-owner", "ORG_OWNER")
	_, manager := e.managementToken(home, "admin-api-manager", "ORG_USER_MANAGER")
	_, plain := e.managementToken(home, "admin-api-plain")
	_, status, noAud := e.machine(home, "admin-api-noaud", nil, "openid")
	if status != 200 {
		t.Fatalf("token without the management audience: %d %v", status, noAud)
	}
	c := browser(t, e.base)
	app := e.signIn(c, "alice", afPassword, "s1").access
	callers := []struct {
		name, token string
		want        int
	}{
		{"IAM_OWNER", e.admin, 200},
		{"ORG_OWNER", owner, 403},
		{"ORG_USER_MANAGER", manager, 403},
		{"user without roles", plain, 403},
		{"token without the management audience", noAud["access_token"].(string), 401},
		{"ordinary app's token", app, 401},
		{"no token", "", 401},
	}
	codes := map[connect.Code]int{connect.CodeUnauthenticated: 401, connect.CodePermissionDenied: 403}
	for _, cl := range callers {
		status, _ := e.call("GET", "/admin/v1/keys", cl.token, "", nil)
		if status != cl.want {
			t.Errorf("ListSigningKeys over REST by %s: %d; want %d", cl.name, status, cl.want)
		}
		if cl.want != 200 { // a rotation by an IAM owner is tested elsewhere
			if status, _ := e.call("POST", "/admin/v1/keys/_rotate", cl.token, "", map[string]any{}); status != cl.want {
				t.Errorf("RotateSigningKey over REST by %s: %d; want %d", cl.name, status, cl.want)
			}
		}
		for _, p := range mdProtocols {
			client := mdAdminClient(t, p, e.base, cl.token)
			_, err := client.ListSigningKeys(e.ctx, &adminv1.ListSigningKeysRequest{})
			got := 200
			if err != nil {
				got = codes[connect.CodeOf(err)]
			}
			if got != cl.want {
				t.Errorf("ListSigningKeys over %s by %s: %v; want %d", p, cl.name, err, cl.want)
			}
			if cl.want != 200 {
				_, err := client.RotateSigningKey(e.ctx, &adminv1.RotateSigningKeyRequest{})
				if codes[connect.CodeOf(err)] != cl.want {
					t.Errorf("RotateSigningKey over %s by %s: %v; want %d", p, cl.name, err, cl.want)
				}
			}
		}
	}
}

// mdAdminClient is mdClient for the admin API.
func mdAdminClient(t *testing.T, protocol, base, token string) adminv1connect.AdminServiceClient {
	t.Helper()
	opts := []connect.ClientOption{connect.WithInterceptors(mdHeaders{token: token})}
	hc := http.DefaultClient
	switch protocol {
	case "grpc":
		hc = &http.Client{Transport: rpc.NewH2CTransport()}
		opts = append(opts, connect.WithGRPC())
	case "grpc-web":
		opts = append(opts, connect.WithGRPCWeb())
	default:
		opts = append(opts, connect.WithProtoJSON())
	}
	return adminv1connect.NewAdminServiceClient(hc, base, opts...)
}

// Issue 13: after failed passwords a user waits per (name, address); an
// admin's UnlockUser lets the user in at once, and a tenant admin of
// another organization can neither unlock the user nor tell it exists.
func TestSecurityUnlockUser(t *testing.T) {
	// Edge takes the client address from X-Forwarded-For.
	e := afStartEnv(t, map[string]string{"GATEHOUSE_TRUSTED_PROXIES": "127.0.0.1/32,::1/128"})
	const from, password = "203.0.113.30", "Uma-Passw0rd!"
	uma := e.user("uma", password, false)
	home := e.homeOrg()
	rivalOrg := e.must("POST", "/management/v1/orgs", e.admin, "", map[string]any{"name": "Rival Corp"})["id"].(string)
	_, rival := e.managementToken(rivalOrg, "rival-owner", "ORG_OWNER")

	c := browser(t, e.base)
	p := afGet(t, c, e.authURL("un", "n-un"), "X-Forwarded-For", from)
	p = afSubmit(t, c, e.base, p, url.Values{"loginName": {"uma"}}, "X-Forwarded-For", from)
	submit := func(pw string) afPage {
		t.Helper()
		return afSubmit(t, c, e.base, p, url.Values{"password": {pw}}, "X-Forwarded-For", from)
	}
	fail := func() {
		t.Helper()
		if p = submit("wrong"); p.status != http.StatusUnauthorized {
			t.Fatalf("wrong password: status %d; want 401:\n%s", p.status, p.body)
		}
	}
	// 3 free failures, then one after each wait (1 s, 2 s): the next
	// attempt must wait 4 s.
	fail()
	fail()
	fail()
	time.Sleep(time.Second + 50*time.Millisecond)
	fail()
	time.Sleep(2*time.Second + 50*time.Millisecond)
	fail()

	for _, tc := range []struct {
		org  string
		want int
	}{{"", http.StatusNotFound}, {home, http.StatusForbidden}} {
		if status, m := e.call("POST", "/management/v1/users/"+uma+"/_unlock", rival, tc.org, map[string]any{}); status != tc.want {
			t.Errorf("UnlockUser by another organization's owner (x-service-orgid %q): %d %v; want %d", tc.org, status, m, tc.want)
		}
	}
	if p = submit(password); p.status != http.StatusUnauthorized || p.loc != nil {
		t.Fatalf("right password within the wait, after the refused unlocks: status %d Location %v; want the 401 page", p.status, p.loc)
	}
	e.must("POST", "/management/v1/users/"+uma+"/_unlock", e.admin, "", map[string]any{})
	if it := e.code(submit(password), "un", "n-un"); it.Subject != uma {
		t.Errorf("right password right after the unlock: sub %s; want uma", it.Subject)
	}
}

// TestSecurityExistenceOracles: a tenant's admin learns nothing about
// other tenants' ids: another organization answers exactly as an unknown
// one, and another organization's user exactly as an unknown user.
func TestSecurityExistenceOracles(t *testing.T) {
	e := afStartEnv(t, nil)
	home := e.homeOrg()
	victim := e.user("victim", "Victim-Passw0rd!", false) // in the home organization
	rivalOrg := e.must("POST", "/management/v1/orgs", e.admin, "", map[string]any{"name": "Oracle Corp"})["id"].(string)
	_, rival := e.managementToken(rivalOrg, "oracle-owner", "ORG_OWNER")
	const unknownOrg, unknownUser = "999999999999999999", "999999999999999998"

	same := func(what string, a, b func() (int, map[string]any), other, unknown string) {
		t.Helper()
		sa, ma := a()
		sb, mb := b()
		ja, _ := json.Marshal(ma)
		jb, _ := json.Marshal(mb)
		// The answers differ only by the id the caller itself sent.
		if sa != sb || strings.ReplaceAll(string(ja), other, "ID") != strings.ReplaceAll(string(jb), unknown, "ID") {
			t.Errorf("%s: existing %d %s, unknown %d %s; want the same answer", what, sa, ja, sb, jb)
		}
		if sa == 200 {
			t.Errorf("%s: 200 for another tenant's id", what)
		}
	}
	for _, path := range []string{"/management/v1/orgs/me", "/management/v1/users/_search", "/management/v1/projects/_search"} {
		method := "POST"
		if strings.HasSuffix(path, "/me") {
			method = "GET"
		}
		same("x-service-orgid on "+path,
			func() (int, map[string]any) { return e.call(method, path, rival, home, map[string]any{}) },
			func() (int, map[string]any) { return e.call(method, path, rival, unknownOrg, map[string]any{}) },
			home, unknownOrg)
	}
	for _, sub := range []string{"", "/metadata/_search"} {
		method := "GET"
		if sub != "" {
			method = "POST"
		}
		same("user "+sub,
			func() (int, map[string]any) {
				return e.call(method, "/management/v1/users/"+victim+sub, rival, "", map[string]any{})
			},
			func() (int, map[string]any) {
				return e.call(method, "/management/v1/users/"+unknownUser+sub, rival, "", map[string]any{})
			},
			victim, unknownUser)
	}
}

// Review of 2026-11-27, finding 1: the CLI's admin client lives in a
// project of the default organization, and that organization's owners
// could change it: point its redirect URIs at their own site, give it a
// secret or keys, and so receive the management tokens of everyone who
// signs in with it (IAM owners and every organization's admins). An admin
// client is the instance's: only an IAM owner changes it.
func TestSecurityAdminClientIsTheInstances(t *testing.T) {
	e := afStart(t)
	home := e.homeOrg()
	_, owner := e.managementToken(home, "org-owner", "ORG_OWNER")
	var projectID, appID string
	for _, p := range e.must("POST", "/management/v1/projects/_search", owner, "", map[string]any{})["result"].([]any) {
		pid := p.(map[string]any)["id"].(string)
		for _, a := range e.must("POST", "/management/v1/projects/"+pid+"/apps/_search", owner, "", map[string]any{})["result"].([]any) {
			if oidc, _ := a.(map[string]any)["oidcConfig"].(map[string]any); oidc != nil && oidc["clientId"] == "gatehouse-cli" {
				projectID, appID = pid, a.(map[string]any)["id"].(string)
			}
		}
	}
	if appID == "" {
		t.Fatal("the org owner does not see the CLI's app")
	}
	app := "/management/v1/projects/" + projectID + "/apps/" + appID
	before := e.must("GET", app, e.admin, "", nil)
	evil := map[string]any{"redirectUris": []string{"https://evil.example/cb"}, "responseTypes": []string{"OIDC_RESPONSE_TYPE_CODE"},
		"grantTypes": []string{"OIDC_GRANT_TYPE_AUTHORIZATION_CODE"}, "appType": "OIDC_APP_TYPE_WEB", "authMethodType": "OIDC_AUTH_METHOD_TYPE_BASIC"}
	for _, tc := range []struct {
		name, method, path string
		body               any
	}{
		{"redirect URIs and auth method", "PUT", app + "/oidc_config", evil},
		{"a client secret", "POST", app + "/oidc_config/_generate_client_secret", map[string]any{}},
		{"a key", "POST", app + "/keys", map[string]any{"type": "KEY_TYPE_JSON"}},
		{"a key removed", "DELETE", app + "/keys/no-such-key", nil},
	} {
		status, m := e.call(tc.method, tc.path, owner, "", tc.body)
		if status != http.StatusForbidden || !strings.Contains(fmt.Sprint(m), "AUTHZ-admin-app") {
			t.Errorf("org owner changes the CLI's admin client (%s): %d %v; want 403 AUTHZ-admin-app", tc.name, status, m)
		}
	}
	if after := e.must("GET", app, e.admin, "", nil); fmt.Sprint(after["app"]) != fmt.Sprint(before["app"]) {
		t.Errorf("refused changes changed the app:\nbefore %v\nafter  %v", before["app"], after["app"])
	}
	// An IAM owner may; the org owner still manages the organization's
	// ordinary apps.
	cfg := before["app"].(map[string]any)["oidcConfig"].(map[string]any)
	e.must("PUT", app+"/oidc_config", e.admin, "", map[string]any{"redirectUris": append(cfg["redirectUris"].([]any), "http://127.0.0.1/other"),
		"responseTypes": cfg["responseTypes"], "grantTypes": cfg["grantTypes"], "appType": cfg["appType"],
		"authMethodType": cfg["authMethodType"], "accessTokenType": cfg["accessTokenType"]})
	e.must("POST", "/management/v1/projects/"+e.projectID+"/apps/"+e.webAppID+"/oidc_config/_generate_client_secret", owner, "", map[string]any{})
}

// Review of 2026-11-27, findings 2 and 3: an organization owner could make
// any user of another organization a member. The answers told unknown ids
// from existing users, ListOrgMembers then showed the user's name and
// e-mail, and by role dominance the user's own organization could no
// longer reset, deactivate or remove the user. Only an IAM owner adds a
// user of another organization; anyone else gets the unknown user's answer.
func TestSecurityMembersOfOtherOrganizations(t *testing.T) {
	e := afStart(t)
	home := e.homeOrg()
	_, owner := e.managementToken(home, "org-owner", "ORG_OWNER")
	otherOrg, _ := e.foreignOrg("Other Corp")
	victim := e.must("POST", "/management/v1/users/human", e.admin, otherOrg, map[string]any{
		"userName": "victim", "profile": map[string]any{"firstName": "Vic", "lastName": "Tim"},
		"email": map[string]any{"email": "victim@other.example"}, "initialPassword": "Victim-Passw0rd!1"})["userId"].(string)
	privileged, _ := e.managementToken(otherOrg, "other-manager", "ORG_USER_MANAGER")
	add := func(token, user string) (int, map[string]any) {
		return e.call("POST", "/management/v1/orgs/me/members", token, "", map[string]any{"userId": user, "roles": []string{"ORG_USER_MANAGER"}})
	}
	unknownStatus, unknown := add(owner, "359876543210987654")
	if unknownStatus != http.StatusNotFound {
		t.Fatalf("org owner adds an unknown user: %d %v; want 404", unknownStatus, unknown)
	}
	for name, id := range map[string]string{"a user": victim, "a user manager": privileged} {
		status, m := add(owner, id)
		if status != unknownStatus || fmt.Sprint(m) != fmt.Sprint(unknown) {
			t.Errorf("org owner adds %s of another organization: %d %v; want what an unknown id gets: %d %v", name, status, m, unknownStatus, unknown)
		}
	}
	for _, m := range e.must("POST", "/management/v1/orgs/me/members/_search", owner, "", map[string]any{})["result"].([]any) {
		if m.(map[string]any)["userId"] == victim {
			t.Fatalf("the refused member is listed: %v", m)
		}
	}
	// The victim's own organization still administers the victim.
	_, otherOwner := e.managementToken(otherOrg, "other-owner", "ORG_OWNER")
	e.must("POST", "/management/v1/users/"+victim+"/_deactivate", otherOwner, otherOrg, map[string]any{})
	// An IAM owner may make a user of another organization a member.
	if status, m := add(e.admin, victim); status != 200 {
		t.Errorf("IAM owner adds a user of another organization: %d %v; want 200", status, m)
	}
}

// Review of 2026-11-27: a request asking for a new login (prompt=login,
// max_age) waits on the password page, but the account selection and
// consent pages accepted any pending request of the browser and answered
// it with the old session: someone at an unlocked browser passed a
// relying party's step-up without the password. Every answer with an
// existing session now checks the request's login requirement.
func TestSecurityStepUpCannotBeSkipped(t *testing.T) {
	e := afStart(t)
	c := browser(t, e.base)
	alice := e.signIn(c, "alice", afPassword, "s1")
	time.Sleep(2100 * time.Millisecond) // auth_time has whole seconds; max_age=1 needs an older one
	requestID := regexp.MustCompile(`name="authRequestID" value="([^"]+)"`)
	for _, tc := range []struct {
		name  string
		extra []string
		via   string
	}{
		{"prompt=login, through the select page", []string{"prompt", "login"}, "select"},
		{"prompt=login with id_token_hint, through the select page", []string{"prompt", "login", "id_token_hint", alice.raw}, "select"},
		{"prompt=login with id_token_hint, through the consent page", []string{"prompt", "login", "id_token_hint", alice.raw}, "consent"},
		{"max_age, through the select page", []string{"max_age", "1"}, "select"},
		{"max_age, through the consent page", []string{"max_age", "1"}, "consent"},
	} {
		p := afGet(t, c, e.authURL("su", "n-su", tc.extra...))
		id := requestID.FindStringSubmatch(p.body)
		if p.loc != nil || id == nil {
			t.Fatalf("%s: want a login page; got %d %v:\n%s", tc.name, p.status, p.loc, p.body)
		}
		page := afGet(t, c, e.base+"/ui/login/"+tc.via+"?authRequestID="+url.QueryEscape(id[1]))
		var got afPage
		if tc.via == "select" {
			got = afSubmit(t, c, e.base, page, url.Values{"sessionID": {alice.claims.SID}})
		} else {
			got = afSubmit(t, c, e.base, page, url.Values{"decision": {"accept"}})
		}
		if got.loc != nil || !afIs(got, "password") {
			t.Errorf("%s: %d %v; want the password page, not an answer", tc.name, got.status, got.loc)
		}
	}
	// The password page it leads to is a real login: auth_time advances.
	p := afGet(t, c, e.authURL("pl", "n-pl", "prompt", "login", "id_token_hint", alice.raw))
	id := requestID.FindStringSubmatch(p.body)
	p = afSubmit(t, c, e.base, afGet(t, c, e.base+"/ui/login/select?authRequestID="+url.QueryEscape(id[1])), url.Values{"sessionID": {alice.claims.SID}})
	again := e.code(afSubmit(t, c, e.base, p, url.Values{"password": {afPassword}}), "pl", "n-pl")
	if again.claims.AuthTime <= alice.claims.AuthTime {
		t.Errorf("after the password: auth_time %d; want after %d", again.claims.AuthTime, alice.claims.AuthTime)
	}
}

// Review of 2026-11-27: anyone can present the CLI's public admin client
// id with a loopback redirect of their own (RFC 8252 §8.6). A local
// program opening the browser at such a URL got a management token for
// whoever had a session there, with no page. Unless the person signs in
// on the request itself, a page now asks them to confirm, every time.
func TestSecurityPublicAdminClientConfirms(t *testing.T) {
	e := afStart(t)
	cli := oauth2.Config{ClientID: "gatehouse-cli", Endpoint: e.provider.Endpoint(), RedirectURL: "http://127.0.0.1:9/callback",
		Scopes: []string{"openid", mgmtAudScope}}
	cli.Endpoint.AuthStyle = oauth2.AuthStyleInParams
	verifier := oauth2.GenerateVerifier()
	start := func(c *http.Client) afPage {
		return afGet(t, c, cli.AuthCodeURL("cli", oauth2.S256ChallengeOption(verifier)))
	}
	c := browser(t, e.base)
	e.signIn(c, "admin", "Admin-Passw0rd-for-e2e", "s1")
	for range 2 { // not remembered
		p := start(c)
		if p.loc != nil || !afIs(p, "decision") || !strings.Contains(p.body, "Administer Gatehouse") {
			t.Fatalf("the CLI's client with a session: %d %v; want the confirmation page naming the management API:\n%s", p.status, p.loc, p.body)
		}
		p = afSubmit(t, c, e.base, p, url.Values{"decision": {"deny"}})
		if p.loc == nil || p.loc.Query().Get("error") != "access_denied" || p.loc.Query().Get("code") != "" {
			t.Fatalf("declined: %d %v; want access_denied", p.status, p.loc)
		}
	}
	p := afSubmit(t, c, e.base, start(c), url.Values{"decision": {"accept"}})
	if p.loc == nil || p.loc.Query().Get("code") == "" {
		t.Fatalf("confirmed: %d %v; want a code", p.status, p.loc)
	}
	tok, err := cli.Exchange(e.ctx, p.loc.Query().Get("code"), oauth2.VerifierOption(verifier))
	if err != nil {
		t.Fatal(err)
	}
	if status, m := e.call("GET", "/management/v1/orgs/me", tok.AccessToken, "", nil); status != 200 {
		t.Errorf("the admin's confirmed CLI token: %d %v; want 200", status, m)
	}
	// Never silently: prompt=none is refused outright.
	p = afGet(t, c, cli.AuthCodeURL("cli", oauth2.S256ChallengeOption(verifier), oauth2.SetAuthURLParam("prompt", "none")))
	if p.loc == nil || p.loc.Query().Get("error") == "" || p.loc.Query().Get("code") != "" {
		t.Errorf("prompt=none: %d %v; want an error", p.status, p.loc)
	}
	// A sign-in on the request itself is the person confirming: no page.
	c2 := browser(t, e.base)
	p = e.password(c2, start(c2), "admin", "Admin-Passw0rd-for-e2e")
	if p.loc == nil || p.loc.Query().Get("code") == "" {
		t.Fatalf("signing in: %d %v; want a code", p.status, p.loc)
	}
}
