package e2e

import (
	"html"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"

	"golang.org/x/oauth2"
)

// Trust, round 2: an external identity is a credential of its user. These
// replay the review's attacks through the public interfaces, each against
// a provider the test controls (fakeOP).

const afAdminPassword = "Admin-Passw0rd-for-e2e"

// fedSignIn starts a sign-in through idp with the shortcut scope and
// follows the browser through the provider back to Gatehouse; it returns
// the page where Gatehouse stops (the client's redirect, the link page, an
// error page).
func (e *afEnv) fedSignIn(op *fakeOP, idp, state string) (*http.Client, afPage) {
	e.t.Helper()
	c := fedBrowser(e.base, op.issuer)
	return c, afGet(e.t, c, e.authURL(state, "n-"+state, "scope", "openid profile urn:gatehouse:iam:org:idp:id:"+idp))
}

// linksOf lists the user's links.
func (e *afEnv) linksOf(userID string) []any {
	e.t.Helper()
	res, _ := e.must("POST", "/management/v1/users/"+userID+"/idps/_search", e.admin, "", map[string]any{})["result"].([]any)
	return res
}

// isParked: Gatehouse shows the link page (the identity names nobody).
func isParked(p afPage) bool {
	return p.loc == nil && strings.Contains(p.body, "no account of this organization is linked")
}

// Finding 1 (high): an organization owner repointed the provider an IAM
// owner is linked to, asserted the IAM owner's subject at its own
// provider, and was signed in as the IAM owner. A provider's issuer and
// client id are a credential of every user linked to it: a new one
// inherits no link, also when changed back later.
func TestSecurityRepointedIdPInheritsNoLink(t *testing.T) {
	e := afStartEnv(t, map[string]string{"GATEHOUSE_IDP_ALLOW_LOOPBACK": "true"})
	corp := startFakeOP(t, map[string]any{"sub": "admin-corp", "email": "admin@corp.example", "email_verified": true})
	evil := startFakeOP(t, map[string]any{"sub": "admin-corp", "email": "mallory@evil.example"})
	idp := e.must("POST", "/management/v1/idps/oidc", e.admin, "", corp.config(map[string]any{"name": "ExtIdP"}))["idpId"].(string)
	admin := e.lookupUser("admin")

	// The IAM owner links the corporate identity by its password.
	c, p := e.fedSignIn(corp, idp, "l1")
	if !isParked(p) {
		t.Fatalf("unknown identity: want the link page; got %d %v:\n%s", p.status, p.loc, p.body)
	}
	if it := e.code(afSubmit(t, c, e.base, p, url.Values{"loginName": {"admin"}, "password": {afAdminPassword}, "confirm": {"yes"}}), "l1", "n-l1"); it.Subject != admin {
		t.Fatalf("linked sign-in as %s; want the IAM owner %s", it.Subject, admin)
	}
	_, p = e.fedSignIn(corp, idp, "l2")
	linkedToken := e.code(p, "l2", "n-l2")
	if linkedToken.Subject != admin || !e.active(linkedToken.access) {
		t.Fatal("the link does not sign the IAM owner in")
	}

	// An organization owner of the same organization, refused for the IAM
	// owner's password, repoints the provider to its own.
	org := e.homeOrg()
	_, owner := e.managementToken(org, "tenant-owner", "ORG_OWNER")
	if status, _ := e.call("POST", "/management/v1/users/"+admin+"/password", owner, "", map[string]any{"password": "Hijacked-Passw0rd!1"}); status != http.StatusForbidden {
		t.Fatalf("the organization owner sets the IAM owner's password: %d; want 403", status)
	}
	if status, body := e.call("PUT", "/management/v1/idps/"+idp+"/oidc_config", owner, "", evil.config(nil)); status != http.StatusOK {
		t.Fatalf("repoint: %d %v", status, body)
	}
	if _, p := e.fedSignIn(evil, idp, "a1"); !isParked(p) {
		t.Fatalf("the repointed provider's assertion of the IAM owner's subject: %d %v; want the link page, no sign-in", p.status, p.loc)
	}
	if links := e.linksOf(admin); len(links) != 0 {
		t.Errorf("the IAM owner keeps %d links to the repointed provider", len(links))
	}
	// What the link signed in ends with it, as with a password reset.
	if e.active(linkedToken.access) {
		t.Error("a token signed in through the dropped link is still active")
	}
	// A new client id at the same issuer is another account there: the
	// same. And pointing back does not bring the link back.
	e.must("PUT", "/management/v1/idps/"+idp+"/oidc_config", e.admin, "", corp.config(nil))
	if _, p := e.fedSignIn(corp, idp, "a2"); !isParked(p) {
		t.Fatalf("pointed back: %d %v; want the link page (links are gone with the provider)", p.status, p.loc)
	}
	// Deactivated, repointed and reactivated: the same.
	c, p = e.fedSignIn(corp, idp, "l3")
	e.code(afSubmit(t, c, e.base, p, url.Values{"loginName": {"admin"}, "password": {afAdminPassword}, "confirm": {"yes"}}), "l3", "n-l3")
	e.must("POST", "/management/v1/idps/"+idp+"/_deactivate", owner, "", map[string]any{})
	e.must("PUT", "/management/v1/idps/"+idp+"/oidc_config", owner, "", evil.config(nil))
	e.must("POST", "/management/v1/idps/"+idp+"/_reactivate", owner, "", map[string]any{})
	if _, p := e.fedSignIn(evil, idp, "a3"); !isParked(p) {
		t.Fatalf("repointed while inactive, then reactivated: %d %v; want the link page", p.status, p.loc)
	}
}

// Finding 2: the provider's "amr" became Gatehouse's. A federated sign-in
// records "fed" alone; an IAM owner (never an organization owner) may
// trust a provider's values, and the trust ends with a new issuer or
// client id.
func TestSecurityUpstreamAMRIsNotGatehouses(t *testing.T) {
	e := afStartEnv(t, map[string]string{"GATEHOUSE_IDP_ALLOW_LOOPBACK": "true"})
	op := startFakeOP(t, map[string]any{"sub": "mfa-user", "amr": []string{"mfa", "hwk"}, "preferred_username": "mfa-user",
		"email": "mfa-user@upstream.example", "given_name": "M", "family_name": "F"})
	idp := e.must("POST", "/management/v1/idps/oidc", e.admin, "", op.config(map[string]any{"name": "Upstream", "autoRegister": true}))["idpId"].(string)
	amr := func(state string) []string {
		t.Helper()
		_, p := e.fedSignIn(op, idp, state)
		return e.code(p, state, "n-"+state).claims.AMR
	}
	if got := amr("m1"); !slices.Equal(got, []string{"fed"}) {
		t.Fatalf("amr of a federated sign-in: %v; want [fed] (the provider's mfa is not Gatehouse's)", got)
	}
	org := e.homeOrg()
	_, owner := e.managementToken(org, "tenant-owner", "ORG_OWNER")
	if status, _ := e.call("POST", "/management/v1/idps/"+idp+"/_trust", owner, "", map[string]any{"trustAmr": true}); status != http.StatusForbidden {
		t.Fatalf("an organization owner trusts its own provider: %d; want 403", status)
	}
	e.must("POST", "/management/v1/idps/"+idp+"/_trust", e.admin, "", map[string]any{"trustAmr": true})
	if got := e.must("GET", "/management/v1/idps/"+idp, e.admin, "", nil)["idp"].(map[string]any)["trustAmr"]; got != true {
		t.Errorf("GetOrgIDPByID trustAmr %v; want true", got)
	}
	if got := amr("m2"); !slices.Equal(got, []string{"fed", "mfa", "hwk"}) {
		t.Fatalf("amr through a trusted provider: %v; want [fed mfa hwk]", got)
	}
	// The trust was in this provider: another client id ends it.
	e.must("PUT", "/management/v1/idps/"+idp+"/oidc_config", owner, "", op.config(map[string]any{"clientId": "other"}))
	if got := e.must("GET", "/management/v1/idps/"+idp, e.admin, "", nil)["idp"].(map[string]any)["trustAmr"]; got == true {
		t.Errorf("trustAmr survives a new client id")
	}
}

// Finding 4: whoever once knew a user's password linked an identity of
// their own and kept signing in after the admin's reset, and after a
// deactivation and reactivation; a password that must be changed was not
// asked for on a federated sign-in.
func TestSecurityLinkedIdentityDoesNotOutliveReset(t *testing.T) {
	e := afStartEnv(t, map[string]string{"GATEHOUSE_IDP_ALLOW_LOOPBACK": "true"})
	op := startFakeOP(t, map[string]any{"sub": "mallory"})
	idp := e.must("POST", "/management/v1/idps/oidc", e.admin, "", op.config(map[string]any{"name": "Mallory's"}))["idpId"].(string)
	alice := e.users["alice"]
	link := func(state string) {
		t.Helper()
		c, p := e.fedSignIn(op, idp, state)
		if !isParked(p) {
			t.Fatalf("want the link page; got %d %v", p.status, p.loc)
		}
		if it := e.code(afSubmit(t, c, e.base, p, url.Values{"loginName": {"alice"}, "password": {afPassword}, "confirm": {"yes"}}), state, "n-"+state); it.Subject != alice {
			t.Fatalf("linked as %s; want alice", it.Subject)
		}
		if _, p := e.fedSignIn(op, idp, state+"-again"); e.code(p, state+"-again", "n-"+state+"-again").Subject != alice {
			t.Fatal("the link does not sign alice in")
		}
	}
	link("r0")
	// An admin removing the link ends what it signed in.
	_, p0 := e.fedSignIn(op, idp, "r0-token")
	viaLink := e.code(p0, "r0-token", "n-r0-token")
	e.must("DELETE", "/management/v1/users/"+alice+"/idps/"+idp+"/mallory", e.admin, "", nil)
	if e.active(viaLink.access) {
		t.Error("a token signed in through a removed link is still active")
	}
	if _, p := e.fedSignIn(op, idp, "r0-after"); !isParked(p) {
		t.Fatalf("after RemoveUserIDP: %d %v; want the link page", p.status, p.loc)
	}
	link("r1")
	e.must("POST", "/management/v1/users/"+alice+"/password", e.admin, "", map[string]any{"password": "Reset-Passw0rd!1", "noChangeRequired": true})
	if _, p := e.fedSignIn(op, idp, "r2"); !isParked(p) {
		t.Fatalf("after the admin's reset: %d %v; want the link page (the link is gone)", p.status, p.loc)
	}
	if links := e.linksOf(alice); len(links) != 0 {
		t.Errorf("alice keeps %d links after the reset", len(links))
	}

	// Deactivation and reactivation cut it too.
	c, p := e.fedSignIn(op, idp, "d1")
	e.code(afSubmit(t, c, e.base, p, url.Values{"loginName": {"alice"}, "password": {"Reset-Passw0rd!1"}, "confirm": {"yes"}}), "d1", "n-d1")
	e.must("POST", "/management/v1/users/"+alice+"/_deactivate", e.admin, "", map[string]any{})
	e.must("POST", "/management/v1/users/"+alice+"/_reactivate", e.admin, "", map[string]any{})
	if _, p := e.fedSignIn(op, idp, "d2"); !isParked(p) {
		t.Fatalf("after deactivation and reactivation: %d %v; want the link page", p.status, p.loc)
	}

	// A user registered through the provider keeps that link, but a
	// password an admin set with a change required is changed first,
	// whichever way the user signs in.
	e.must("PUT", "/management/v1/idps/"+idp+"/oidc_config", e.admin, "", op.config(map[string]any{"scopes": []string{"openid"}}))
	e.must("POST", "/management/v1/policies/login", e.admin, "", map[string]any{"allowUsernamePassword": true, "allowExternalIdp": true, "allowRegister": true})
	op.assert(map[string]any{"sub": "reggie", "preferred_username": "reggie", "email": "reggie@upstream.example", "given_name": "Reg", "family_name": "Gie"})
	c, p = e.fedSignIn(op, idp, "g1")
	form := url.Values{"userName": {"reggie"}, "firstName": {"Reg"}, "lastName": {"Gie"}, "email": {"reggie@upstream.example"}}
	for _, h := range afHiddenRE.FindAllStringSubmatch(p.body, 2) {
		form.Set(h[1], html.UnescapeString(h[2]))
	}
	req, _ := http.NewRequest("POST", e.base+"/ui/login/idp/register", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	reggie := e.code(afDo(t, c, req), "g1", "n-g1").Subject
	e.must("POST", "/management/v1/users/"+reggie+"/password", e.admin, "", map[string]any{"password": "Initial-Passw0rd!1"})
	c, p = e.fedSignIn(op, idp, "g2")
	if p.loc != nil || !afIs(p, "currentPassword") || !afIs(p, "newPassword") {
		t.Fatalf("federated sign-in with a password to change: %d %v; want the change page", p.status, p.loc)
	}
	// The change completes the sign-in, as after a password.
	if it := e.code(afSubmit(t, c, e.base, p, url.Values{"currentPassword": {"Initial-Passw0rd!1"}, "newPassword": {"Reggie-Changed-1!"},
		"confirmPassword": {"Reggie-Changed-1!"}}), "g2", "n-g2"); it.Subject != reggie {
		t.Fatalf("after the change: %s; want reggie", it.Subject)
	}
	if links := e.linksOf(reggie); len(links) != 1 {
		t.Errorf("the registered link: %d links; want it kept", len(links))
	}
}

// Finding 5: an IAM owner who marked a tenant's app as admin client handed
// the tenant, who kept the app's secret, every IAM owner's management
// token; and unmarking it left its tokens and codes working. Marking now
// replaces the secret (the new one goes to the IAM owner only); unmarking
// ends the app's management tokens at once and its codes are not redeemed.
func TestSecurityAdminMarkIsACredentialCut(t *testing.T) {
	e := afStart(t)
	tenantSecret := e.web.ClientSecret // the app's creator holds it
	marked := e.must("POST", "/management/v1/projects/"+e.projectID+"/apps/"+e.webAppID+"/_admin_client", e.admin, "", map[string]any{"adminClient": true})
	newSecret, _ := marked["clientSecret"].(string)
	if newSecret == "" || newSecret == tenantSecret {
		t.Fatalf("marking answered %v; want a new client secret", marked)
	}
	old := e.web
	old.Scopes = []string{"openid", mgmtAudScope, "offline_access"}
	cfg := old
	cfg.ClientSecret = newSecret
	e.web.ClientSecret = newSecret

	c := browser(t, e.base)
	e.signIn(c, "admin", afAdminPassword, "s1")
	confirmedCode := func(state string) string {
		t.Helper()
		p := e.authorize(c, cfg, cfg.Scopes, "")
		p = afSubmit(t, c, e.base, p, url.Values{"decision": {"accept"}})
		if p.loc == nil || p.loc.Query().Get("code") == "" {
			t.Fatalf("%s: confirmed request: %d %v; want a code", state, p.status, p.loc)
		}
		return p.loc.Query().Get("code")
	}
	// The tenant's old secret redeems nothing.
	if _, err := old.Exchange(e.ctx, confirmedCode("old")); err == nil || !strings.Contains(err.Error(), "invalid_client") {
		t.Fatalf("code redeemed with the secret the tenant kept: %v; want invalid_client", err)
	}
	tok, err := cfg.Exchange(e.ctx, confirmedCode("new"))
	if err != nil {
		t.Fatal(err)
	}
	if status, m := e.call("GET", "/management/v1/orgs/me", tok.AccessToken, "", nil); status != http.StatusOK {
		t.Fatalf("the IAM owner's management token through the admin client: %d %v", status, m)
	}
	pending := confirmedCode("pending")

	e.must("POST", "/management/v1/projects/"+e.projectID+"/apps/"+e.webAppID+"/_admin_client", e.admin, "", map[string]any{"adminClient": false})
	if status, _ := e.call("GET", "/management/v1/orgs/me", tok.AccessToken, "", nil); status != http.StatusUnauthorized {
		t.Errorf("management token of an unmarked admin client: %d; want 401 at once", status)
	}
	if status, _ := e.call("GET", "/admin/v1/keys", tok.AccessToken, "", nil); status != http.StatusUnauthorized {
		t.Errorf("admin API with an unmarked admin client's token: %d; want 401", status)
	}
	if _, err := cfg.Exchange(e.ctx, pending); err == nil || !strings.Contains(err.Error(), "invalid_grant") {
		t.Errorf("code of an unmarked admin client redeemed: %v; want invalid_grant", err)
	}
	if tok.RefreshToken != "" {
		if _, err := cfg.TokenSource(e.ctx, &oauth2.Token{RefreshToken: tok.RefreshToken}).Token(); err == nil {
			t.Errorf("refresh of an unmarked admin client's management grant succeeded")
		}
	}
}

// Finding 9: the link page showed only the provider's name, so a victim
// walked there through the attacker's account at the provider typed their
// password and linked the attacker's identity. The page shows the identity
// (name, e-mail, identifier, provider) and links only on an explicit
// confirmation; without it nothing is linked.
func TestSecurityLinkShowsAndConfirmsTheIdentity(t *testing.T) {
	e := afStartEnv(t, map[string]string{"GATEHOUSE_IDP_ALLOW_LOOPBACK": "true"})
	op := startFakeOP(t, map[string]any{"sub": "attacker-sub", "name": "Mallory Attacker", "email": "mallory@evil.example"})
	idp := e.must("POST", "/management/v1/idps/oidc", e.admin, "", op.config(map[string]any{"name": "Corp SSO"}))["idpId"].(string)
	c, p := e.fedSignIn(op, idp, "c1")
	for _, want := range []string{"Mallory Attacker", "mallory@evil.example", "attacker-sub", op.issuer} {
		if !strings.Contains(p.body, html.EscapeString(want)) {
			t.Errorf("the link page does not show %q:\n%s", want, p.body)
		}
	}
	if !afIs(p, "confirm") {
		t.Errorf("the link page has no confirmation:\n%s", p.body)
	}
	refused := afSubmit(t, c, e.base, p, url.Values{"loginName": {"alice"}, "password": {afPassword}})
	if refused.status != http.StatusBadRequest || refused.loc != nil || !strings.Contains(refused.body, "confirm that this identity is yours") {
		t.Fatalf("link without the confirmation: %d %v; want 400 asking for it", refused.status, refused.loc)
	}
	if links := e.linksOf(e.users["alice"]); len(links) != 0 {
		t.Fatalf("unconfirmed link stored: %v", links)
	}
	if it := e.code(afSubmit(t, c, e.base, refused, url.Values{"loginName": {"alice"}, "password": {afPassword}, "confirm": {"yes"}}), "c1", "n-c1"); it.Subject != e.users["alice"] {
		t.Fatalf("confirmed link signed in %s; want alice", it.Subject)
	}
}

// Finding 3: an external identity asserting a verified address that a
// user of the organization already holds was registered beside it, also
// verified: the victim's sign-in by e-mail then found two users and failed,
// and relying parties keying on the address saw two subjects. A verified
// address belongs to one user per organization: the identity is
// registered unverified, and an admin cannot add a second verified one.
func TestSecurityVerifiedEmailBelongsToOneUser(t *testing.T) {
	e := afStartEnv(t, map[string]string{"GATEHOUSE_IDP_ALLOW_LOOPBACK": "true"})
	op := startFakeOP(t, map[string]any{"sub": "squatter", "preferred_username": "squatter", "email": "alice@example.com",
		"email_verified": true, "given_name": "Sq", "family_name": "Uatter"})
	idp := e.must("POST", "/management/v1/idps/oidc", e.admin, "", op.config(map[string]any{"name": "Upstream", "autoRegister": true,
		"usernameMapping": "OIDC_MAPPING_FIELD_PREFERRED_USERNAME"}))["idpId"].(string)
	_, p := e.fedSignIn(op, idp, "v1")
	squatter := e.code(p, "v1", "n-v1").Subject
	if squatter == e.users["alice"] {
		t.Fatal("the identity signed in as alice")
	}
	u := e.must("GET", "/management/v1/users/"+squatter, e.admin, "", nil)["user"].(map[string]any)
	email, _ := u["human"].(map[string]any)["email"].(map[string]any)
	if email["email"] != "alice@example.com" || email["isEmailVerified"] == true {
		t.Errorf("registered identity's e-mail %v; want alice@example.com, unverified", email)
	}
	// alice still signs in by her address.
	c := browser(t, e.base)
	if it := e.code(e.password(c, afGet(t, c, e.authURL("v2", "n-v2")), "alice@example.com", afPassword), "v2", "n-v2"); it.Subject != e.users["alice"] {
		t.Errorf("sign-in by e-mail: %s; want alice", it.Subject)
	}
	// An admin cannot give the address, verified, to another user.
	status, res := e.call("POST", "/management/v1/users/human", e.admin, "", map[string]any{"userName": "alice2",
		"profile": map[string]any{"firstName": "A", "lastName": "Two"}, "email": map[string]any{"email": "ALICE@example.com", "isEmailVerified": true}})
	if status != http.StatusConflict {
		t.Errorf("AddHumanUser with alice's verified address: %d %v; want 409", status, res)
	}
}

// Finding 6: a project grant was unilateral and invisible: the granted
// organization could neither see nor remove it, and a consent outlived the
// grant's removal and re-creation. The granted organization's owners list
// what they received and refuse it (a cut, as a removal); a consent holds
// only for the grant it was given under.
func TestSecurityGrantsAreVisibleAndRefusable(t *testing.T) {
	e := afStart(t)
	partner, _ := e.foreignOrg("Partner Corp")
	third, _ := e.foreignOrg("Third Corp")
	e.must("POST", "/management/v1/users/human/_import", e.admin, partner, map[string]any{
		"userName": "pat", "profile": map[string]any{"firstName": "Pat", "lastName": "Partner"},
		"email": map[string]any{"email": "pat@partner.example"}, "password": "Pat-Passw0rd!1"})
	_, partnerOwner := e.managementToken(partner, "partner-owner", "ORG_OWNER")
	_, thirdOwner := e.managementToken(third, "third-owner", "ORG_OWNER")
	scopes := []string{"openid", orgScope + partner}
	cfg := e.web
	cfg.Scopes = scopes
	grant := e.must("POST", "/management/v1/projects/"+e.projectID+"/grants", e.admin, "", map[string]any{"grantedOrgId": partner})["grantId"].(string)

	received := func(token string) []any {
		t.Helper()
		res, _ := e.must("POST", "/management/v1/granted_projects/_search", token, "", map[string]any{})["result"].([]any)
		return res
	}
	got := received(partnerOwner)
	if len(got) != 1 || got[0].(map[string]any)["grantId"] != grant || got[0].(map[string]any)["projectId"] != e.projectID ||
		got[0].(map[string]any)["projectOwnerId"] != e.homeOrg() {
		t.Fatalf("the partner's received grants: %v; want the grant of %s", got, e.projectID)
	}
	if n := len(received(thirdOwner)); n != 0 {
		t.Errorf("another organization sees %d received grants; want none", n)
	}

	// pat consents once under the grant.
	c := browser(t, e.base)
	p := e.password(c, e.authorize(c, e.web, scopes, ""), "pat", "Pat-Passw0rd!1")
	p = afSubmit(t, c, e.base, p, url.Values{"decision": {"accept"}})
	tok, err := cfg.Exchange(e.ctx, p.loc.Query().Get("code"))
	if err != nil {
		t.Fatal(err)
	}
	if p := e.authorize(c, e.web, scopes, ""); p.loc == nil || p.loc.Query().Get("code") == "" {
		t.Fatalf("consent remembered under the grant: %d %v; want a code", p.status, p.loc)
	}

	// Nobody but the granted organization refuses it.
	refuse := "/management/v1/granted_projects/" + e.projectID + "/grants/" + grant + "/_refuse"
	if status, _ := e.call("POST", refuse, thirdOwner, "", map[string]any{}); status != http.StatusNotFound {
		t.Errorf("another organization refuses the partner's grant: %d; want 404", status)
	}
	e.must("POST", refuse, partnerOwner, "", map[string]any{})
	if n := len(received(partnerOwner)); n != 0 {
		t.Errorf("after refusing: %d received grants; want none", n)
	}
	if e.active(tok.AccessToken) {
		t.Error("pat's access token is active after the partner refused the grant")
	}
	afErrorRedirect(t, e.authorize(c, e.web, scopes, ""), afRedirect, "invalid_scope", "st", false)

	// Granted again: another grant, and pat is asked again.
	e.must("POST", "/management/v1/projects/"+e.projectID+"/grants", e.admin, "", map[string]any{"grantedOrgId": partner})
	if p := e.authorize(c, e.web, scopes, ""); p.loc != nil || !afIs(p, "decision") {
		t.Fatalf("after a new grant: %d %v; want the consent page again", p.status, p.loc)
	}
}
