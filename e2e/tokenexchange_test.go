package e2e

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/coreos/go-oidc/v3/oidc"
	"github.com/go-jose/go-jose/v4"
	"golang.org/x/oauth2"
)

const (
	txGrant   = "urn:ietf:params:oauth:grant-type:token-exchange"
	txAccess  = "urn:ietf:params:oauth:token-type:access_token"
	txRefresh = "urn:ietf:params:oauth:token-type:refresh_token"
	txID      = "urn:ietf:params:oauth:token-type:id_token"
	txJWT     = "urn:ietf:params:oauth:token-type:jwt"
)

// txApp is a confidential web app of the flows' project with JWT access
// tokens; exchange adds the token exchange grant.
func (e *afEnv) txApp(name string, exchange bool) oauth2.Config {
	e.t.Helper()
	grants := []string{"OIDC_GRANT_TYPE_AUTHORIZATION_CODE", "OIDC_GRANT_TYPE_REFRESH_TOKEN"}
	if exchange {
		grants = append(grants, "OIDC_GRANT_TYPE_TOKEN_EXCHANGE")
	}
	app := e.app(map[string]any{
		"name": name, "redirectUris": []string{afRedirect}, "responseTypes": []string{"OIDC_RESPONSE_TYPE_CODE"},
		"grantTypes": grants, "appType": "OIDC_APP_TYPE_WEB", "authMethodType": "OIDC_AUTH_METHOD_TYPE_BASIC",
		"accessTokenType": "OIDC_TOKEN_TYPE_JWT",
	})
	return oauth2.Config{ClientID: app["clientId"].(string), ClientSecret: app["clientSecret"].(string),
		Endpoint: e.provider.Endpoint(), RedirectURL: afRedirect}
}

// txLogin signs user in to cfg in a new browser (code flow) and returns
// the token response.
func (e *afEnv) txLogin(cfg oauth2.Config, user, password string, scopes ...string) *oauth2.Token {
	e.t.Helper()
	c := browser(e.t, e.base)
	p := e.password(c, e.authorize(c, cfg, scopes, ""), user, password)
	if p.loc == nil || p.loc.Query().Get("code") == "" {
		e.t.Fatalf("want a code redirect; got %d %v:\n%s", p.status, p.loc, p.body)
	}
	tok, err := cfg.Exchange(e.ctx, p.loc.Query().Get("code"))
	if err != nil {
		e.t.Fatalf("code exchange: %v", err)
	}
	return tok
}

// exchange posts a token exchange request as cfg (client_secret_basic).
func (e *afEnv) exchange(cfg oauth2.Config, form url.Values, proofs ...string) dpopResponse {
	e.t.Helper()
	form.Set("grant_type", txGrant)
	return dpopPost(e.t, e.base+"/oauth/v2/token", form, [2]string{cfg.ClientID, cfg.ClientSecret}, proofs...)
}

func txRefused(t *testing.T, what string, r dpopResponse, code string) {
	t.Helper()
	if r.status != 400 || r.body["error"] != code {
		t.Errorf("%s: %d %s; want 400 %s", what, r.status, r.raw, code)
	}
}

func txIssued(t *testing.T, what string, r dpopResponse, typ string) string {
	t.Helper()
	if r.status != 200 || r.body["issued_token_type"] != typ || r.body["access_token"] == nil {
		t.Fatalf("%s: %d %s; want 200 with issued_token_type %s", what, r.status, r.raw, typ)
	}
	return r.body["access_token"].(string)
}

// TestTokenExchange runs RFC 8693 through the token endpoint: a client
// narrows its own tokens (access, refresh, ID); a service in the token's
// audience gets a delegated token carrying act (nested for chains); every
// widening, foreign, forged or revoked subject token is refused with the
// specification's code; revoking the subject revokes what was exchanged
// from it; a DPoP-bound subject needs its key.
func TestTokenExchange(t *testing.T) {
	t.Parallel()
	e := afStart(t)
	doc := dpopDo(t, mustRequest(t, http.MethodGet, e.base+"/.well-known/openid-configuration"))
	if gts, _ := doc.body["grant_types_supported"].([]any); !slices.Contains(gts, any(txGrant)) {
		t.Fatalf("grant_types_supported %v lacks token exchange", gts)
	}
	front, back, plain := e.txApp("tx-front", true), e.txApp("tx-back", true), e.txApp("tx-plain", false)
	alice := e.txLogin(front, "alice", afPassword, "openid", "profile", "offline_access")
	at, rt := alice.AccessToken, alice.RefreshToken
	idt, _ := alice.Extra("id_token").(string)
	if aud := jwtClaims(t, at)["aud"]; !slices.Contains(toStrings(aud), e.projectID) {
		t.Fatalf("access token aud %v; want the project %s", aud, e.projectID)
	}

	// The grant must be registered.
	txRefused(t, "unregistered client", e.exchange(plain, url.Values{"subject_token": {at}, "subject_token_type": {txAccess}}), "unauthorized_client")

	// The client's own access token, narrowed.
	r := e.exchange(front, url.Values{"subject_token": {at}, "subject_token_type": {txAccess}, "scope": {"openid"}, "audience": {e.projectID}})
	narrowed := txIssued(t, "own token narrowed", r, txAccess)
	if r.body["token_type"] != "Bearer" || r.body["scope"] != "openid" {
		t.Errorf("narrowed: %s; want token_type Bearer, scope openid", r.raw)
	}
	c := jwtClaims(t, narrowed)
	if c["sub"] != e.users["alice"] || c["client_id"] != front.ClientID || c["act"] != nil || !slices.Equal(toStrings(c["aud"]), []string{e.projectID}) {
		t.Errorf("narrowed claims %v; want alice's, the front's, aud the project only, no act", c)
	}
	if !e.active(narrowed) {
		t.Error("narrowed token inactive")
	}
	if exp, subExp := c["exp"].(float64), jwtClaims(t, at)["exp"].(float64); exp > subExp {
		t.Errorf("narrowed token expires at %v, after its subject token (%v): an exchange must renew nothing", exp, subExp)
	}
	// Requested as jwt: the same, named so.
	txIssued(t, "requested jwt", e.exchange(front, url.Values{"subject_token": {at}, "subject_token_type": {txAccess},
		"requested_token_type": {txJWT}}), txJWT)

	// Only narrowing.
	txRefused(t, "wider scope", e.exchange(front, url.Values{"subject_token": {at}, "subject_token_type": {txAccess}, "scope": {"openid email"}}), "invalid_scope")
	txRefused(t, "foreign audience", e.exchange(front, url.Values{"subject_token": {at}, "subject_token_type": {txAccess}, "audience": {"another-api"}}), "invalid_target")
	txRefused(t, "management audience", e.exchange(front, url.Values{"subject_token": {at}, "subject_token_type": {txAccess}, "audience": {"gatehouse"}}), "invalid_target")
	txRefused(t, "resource not held", e.exchange(front, url.Values{"subject_token": {at}, "subject_token_type": {txAccess}, "resource": {"https://api.example.com"}}), "invalid_target")
	txRefused(t, "unknown requested type", e.exchange(front, url.Values{"subject_token": {at}, "subject_token_type": {txAccess},
		"requested_token_type": {"urn:ietf:params:oauth:token-type:saml2"}}), "invalid_request")
	txRefused(t, "refresh token as access token", e.exchange(front, url.Values{"subject_token": {rt}, "subject_token_type": {txAccess}}), "invalid_request")
	txRefused(t, "forged JWT", e.exchange(front, url.Values{"subject_token": {forgedJWT(t, e.base, e.users["alice"], front.ClientID)}, "subject_token_type": {txJWT}}), "invalid_request")

	// A service in the token's audience: delegation with an actor token
	// of its own; without one, it would impersonate, which an app cannot.
	bob := e.txLogin(back, "bob", afBobPass, "openid")
	txRefused(t, "impersonation by an app", e.exchange(back, url.Values{"subject_token": {at}, "subject_token_type": {txAccess}}), "invalid_request")
	txRefused(t, "actor token of another client", e.exchange(back, url.Values{"subject_token": {at}, "subject_token_type": {txAccess},
		"actor_token": {at}, "actor_token_type": {txAccess}}), "invalid_request")
	txRefused(t, "actor token without its type", e.exchange(back, url.Values{"subject_token": {at}, "subject_token_type": {txAccess},
		"actor_token": {bob.AccessToken}}), "invalid_request")
	r = e.exchange(back, url.Values{"subject_token": {at}, "subject_token_type": {txAccess}, "actor_token": {bob.AccessToken},
		"actor_token_type": {txAccess}, "scope": {"openid profile"}})
	delegated := txIssued(t, "delegation", r, txAccess)
	c = jwtClaims(t, delegated)
	act, _ := c["act"].(map[string]any)
	if c["sub"] != e.users["alice"] || c["client_id"] != back.ClientID || act["sub"] != e.users["bob"] || act["act"] != nil {
		t.Fatalf("delegated claims %v; want sub alice, client the back end, act {sub: bob}", c)
	}
	if in := e.introspection(delegated); in["active"] != true || in["act"] == nil {
		t.Errorf("introspection of the delegated token %v; want active with act", in)
	}
	// A chain: the delegated token, exchanged again with an actor.
	r = e.exchange(back, url.Values{"subject_token": {delegated}, "subject_token_type": {txAccess}, "actor_token": {bob.AccessToken},
		"actor_token_type": {txAccess}})
	chained := jwtClaims(t, txIssued(t, "chain", r, txAccess))
	outer, _ := chained["act"].(map[string]any)
	inner, _ := outer["act"].(map[string]any)
	if outer["sub"] != e.users["bob"] || inner["sub"] != e.users["bob"] {
		t.Errorf("chained act %v; want nested {sub: bob, act: {sub: bob}}", chained["act"])
	}

	// A token of an app of another project, not addressed to the back end.
	proj := e.must("POST", "/management/v1/projects", e.admin, "", map[string]any{"name": "Elsewhere"})["id"].(string)
	other := e.must("POST", "/management/v1/projects/"+proj+"/apps/oidc", e.admin, "", map[string]any{
		"name": "elsewhere-web", "redirectUris": []string{afRedirect}, "responseTypes": []string{"OIDC_RESPONSE_TYPE_CODE"},
		"grantTypes": []string{"OIDC_GRANT_TYPE_AUTHORIZATION_CODE"}, "appType": "OIDC_APP_TYPE_WEB", "authMethodType": "OIDC_AUTH_METHOD_TYPE_BASIC",
	})
	elsewhere := e.txLogin(oauth2.Config{ClientID: other["clientId"].(string), ClientSecret: other["clientSecret"].(string),
		Endpoint: e.provider.Endpoint(), RedirectURL: afRedirect}, "alice", afPassword, "openid")
	txRefused(t, "subject token not addressed to the caller", e.exchange(back, url.Values{"subject_token": {elsewhere.AccessToken},
		"subject_token_type": {txAccess}, "actor_token": {bob.AccessToken}, "actor_token_type": {txAccess}}), "invalid_request")

	txRefused(t, "another client's refresh token", e.exchange(back, url.Values{"subject_token": {rt}, "subject_token_type": {txRefresh},
		"actor_token": {bob.AccessToken}, "actor_token_type": {txAccess}}), "invalid_request")

	// Refresh and ID tokens as subjects; a refresh token of the family.
	fromRefresh := txIssued(t, "refresh token subject", e.exchange(front, url.Values{"subject_token": {rt}, "subject_token_type": {txRefresh},
		"scope": {"openid"}}), txAccess)
	r = e.exchange(front, url.Values{"subject_token": {rt}, "subject_token_type": {txRefresh}, "requested_token_type": {txRefresh},
		"scope": {"openid offline_access"}})
	newRT := txIssued(t, "refresh token requested", r, txRefresh)
	if r.body["token_type"] != "N_A" {
		t.Errorf("refresh token response %s; want token_type N_A", r.raw)
	}
	txRefused(t, "refresh token for the back end", e.exchange(back, url.Values{"subject_token": {at}, "subject_token_type": {txAccess},
		"actor_token": {bob.AccessToken}, "actor_token_type": {txAccess}, "requested_token_type": {txRefresh}}), "invalid_request")
	r = e.exchange(front, url.Values{"subject_token": {idt}, "subject_token_type": {txID}, "requested_token_type": {txID}})
	newID := txIssued(t, "ID token for an ID token", r, txID)
	if _, err := e.provider.Verifier(&oidc.Config{ClientID: front.ClientID}).Verify(e.ctx, newID); err != nil {
		t.Errorf("exchanged ID token does not verify: %v", err)
	}
	fromID := txIssued(t, "access token for an ID token", e.exchange(front, url.Values{"subject_token": {idt}, "subject_token_type": {txJWT}}), txAccess)
	if s := jwtClaims(t, fromID)["scope"]; s != "openid" {
		t.Errorf("access token from an ID token has scope %v; want openid (all an ID token holds)", s)
	}

	// Revoking the subject revokes what was exchanged from it.
	if r := dpopPost(t, e.base+"/oauth/v2/revoke", url.Values{"token": {at}}, [2]string{front.ClientID, front.ClientSecret}); r.status != 200 {
		t.Fatalf("revoke: %d %s", r.status, r.raw)
	}
	for name, tok := range map[string]string{"narrowed": narrowed, "delegated": delegated} {
		if e.active(tok) {
			t.Errorf("%s token still active after its subject token was revoked", name)
		}
	}
	txRefused(t, "revoked subject token", e.exchange(front, url.Values{"subject_token": {at}, "subject_token_type": {txAccess}}), "invalid_request")
	if r := dpopPost(t, e.base+"/oauth/v2/revoke", url.Values{"token": {rt}, "token_type_hint": {"refresh_token"}},
		[2]string{front.ClientID, front.ClientSecret}); r.status != 200 {
		t.Fatalf("revoke refresh token: %d %s", r.status, r.raw)
	}
	if e.active(fromRefresh) {
		t.Error("token exchanged from a refresh token still active after its family was revoked")
	}
	if _, err := front.TokenSource(e.ctx, &oauth2.Token{RefreshToken: newRT}).Token(); err == nil {
		t.Error("refresh token exchanged from a revoked family still works")
	}

	// A DPoP-bound subject token is exchanged only with a proof of its key.
	key := newDPoPKey(t)
	tokenURL := e.base + "/oauth/v2/token"
	c2 := browser(t, e.base)
	p := e.password(c2, e.authorize(c2, front, []string{"openid"}, ""), "alice", afPassword)
	r = dpopPost(t, tokenURL, url.Values{"grant_type": {"authorization_code"}, "code": {p.loc.Query().Get("code")}, "redirect_uri": {afRedirect}},
		[2]string{front.ClientID, front.ClientSecret}, key.proof("POST", tokenURL, nil, nil))
	bound := r.body["access_token"].(string)
	txRefused(t, "bound subject without a proof", e.exchange(front, url.Values{"subject_token": {bound}, "subject_token_type": {txAccess}}), "invalid_request")
	r = e.exchange(front, url.Values{"subject_token": {bound}, "subject_token_type": {txAccess}}, key.proof("POST", tokenURL, nil, nil))
	if txIssued(t, "bound subject with its proof", r, txAccess); r.body["token_type"] != "DPoP" {
		t.Errorf("exchange with a proof: %s; want token_type DPoP", r.raw)
	}

	// Logout ends the session: its ID tokens are no subject any more.
	c3 := browser(t, e.base)
	p = e.password(c3, e.authorize(c3, front, []string{"openid"}, ""), "alice", afPassword)
	tok3, err := front.Exchange(e.ctx, p.loc.Query().Get("code"))
	if err != nil {
		t.Fatal(err)
	}
	id3, _ := tok3.Extra("id_token").(string)
	idSubject := url.Values{"subject_token": {id3}, "subject_token_type": {txID}}
	txIssued(t, "ID token of a live session", e.exchange(front, idSubject), txAccess)
	e.endSession(c3, url.Values{"id_token_hint": {id3}})
	txRefused(t, "ID token of an ended session", e.exchange(front, idSubject), "invalid_request")

	// A delegation ends with its actor: deactivating bob cuts it.
	alice2 := e.txLogin(front, "alice", afPassword, "openid")
	bob2 := e.txLogin(back, "bob", afBobPass, "openid")
	delegated2 := txIssued(t, "delegation before the actor's deactivation", e.exchange(back, url.Values{"subject_token": {alice2.AccessToken},
		"subject_token_type": {txAccess}, "actor_token": {bob2.AccessToken}, "actor_token_type": {txAccess}}), txAccess)
	if !e.active(delegated2) {
		t.Fatal("fresh delegated token inactive")
	}
	e.must("POST", "/management/v1/users/"+e.users["bob"]+"/_deactivate", e.admin, "", map[string]any{})
	if e.active(delegated2) {
		t.Error("delegated token still active after its actor was deactivated")
	}

	// Every exchange is in the audit trail.
	var n int
	if err := e.dirDB(t).QueryRow(`SELECT COUNT(*) FROM events WHERE event_type = 'user.token.exchanged'`).Scan(&n); err != nil || n < 9 {
		t.Errorf("%d token exchange events (%v); want one per exchange", n, err)
	}
}

// TestTokenExchangeImpersonation: a machine user exchanges a user's token
// for one of its own, without an actor, only where the organization
// enables it, holding ORG_END_USER_IMPERSONATOR there, and dominating the
// user.
func TestTokenExchangeImpersonation(t *testing.T) {
	t.Parallel()
	e := afStart(t)
	home := e.homeOrg()
	front := e.txApp("imp-front", true)
	alice := e.txLogin(front, "alice", afPassword, "openid", "profile")
	robot := e.must("POST", "/management/v1/users/machine", e.admin, home, map[string]any{"userName": "impersonator", "name": "impersonator", "accessTokenType": "ACCESS_TOKEN_TYPE_JWT"})["userId"].(string)
	sec := e.must("PUT", "/management/v1/users/"+robot+"/secret", e.admin, home, nil)
	machine := oauth2.Config{ClientID: sec["clientId"].(string), ClientSecret: sec["clientSecret"].(string)}
	subject := url.Values{"subject_token": {alice.AccessToken}, "subject_token_type": {txAccess}}

	txRefused(t, "no role, not enabled", e.exchange(machine, subject), "invalid_request")
	e.must("POST", "/management/v1/orgs/me/members", e.admin, home, map[string]any{"userId": robot, "roles": []string{"ORG_END_USER_IMPERSONATOR"}})
	txRefused(t, "role, not enabled", e.exchange(machine, subject), "invalid_request")
	e.must("PUT", "/management/v1/policies/security", e.admin, home, map[string]any{"enableImpersonation": true})
	r := e.exchange(machine, subject)
	tok := txIssued(t, "impersonation", r, txAccess)
	c := jwtClaims(t, tok)
	if c["sub"] != e.users["alice"] || c["client_id"] != machine.ClientID || c["act"] != nil {
		t.Fatalf("impersonation claims %v; want alice's token of the machine user, no act", c)
	}
	if aud := toStrings(c["aud"]); slices.Contains(aud, front.ClientID) || !slices.Contains(aud, e.projectID) {
		t.Errorf("impersonation audience %v; want the machine user's reach only (the project, not the front app)", aud)
	}
	// The admin holds roles the machine user does not: not impersonated.
	admin := e.txLogin(front, "admin", "Admin-Passw0rd-for-e2e", "openid")
	txRefused(t, "impersonating an IAM owner", e.exchange(machine, url.Values{"subject_token": {admin.AccessToken}, "subject_token_type": {txAccess}}),
		"invalid_request")
	// An organization owner cannot grant the role: only an IAM owner.
	_, owner := e.managementToken(home, "imp-owner", "ORG_OWNER")
	if st, _ := e.call("POST", "/management/v1/orgs/me/members", owner, home, map[string]any{"userId": e.users["bob"],
		"roles": []string{"ORG_END_USER_IMPERSONATOR"}}); st != 403 {
		t.Errorf("organization owner granting the impersonator role: %d; want 403", st)
	}
	// Removing the role revokes what it issued; so does turning the policy
	// off, and deactivating the impersonator.
	if !e.active(tok) {
		t.Fatal("impersonated token inactive before any change")
	}
	e.must("DELETE", "/management/v1/orgs/me/members/"+robot, e.admin, home, nil)
	if e.active(tok) {
		t.Error("impersonated token still active after the impersonator role was removed")
	}
	e.must("POST", "/management/v1/orgs/me/members", e.admin, home, map[string]any{"userId": robot, "roles": []string{"ORG_END_USER_IMPERSONATOR"}})
	tok2 := txIssued(t, "impersonation with the role again", e.exchange(machine, subject), txAccess)
	// Turned off: refused again at once, and what it issued goes.
	e.must("PUT", "/management/v1/policies/security", e.admin, home, map[string]any{"enableImpersonation": false})
	if e.active(tok2) {
		t.Error("impersonated token still active after the policy was turned off")
	}
	txRefused(t, "disabled again", e.exchange(machine, subject), "invalid_request")
	txRefused(t, "the impersonated token exchanged again, disabled", e.exchange(machine, url.Values{"subject_token": {tok},
		"subject_token_type": {txAccess}}), "invalid_request")

	// The machine user's own stateless JWT: what is exchanged from it goes
	// when it is revoked.
	st, own := postForm(t, e.base+"/oauth/v2/token", url.Values{"grant_type": {"client_credentials"}, "scope": {"openid profile"},
		"client_id": {machine.ClientID}, "client_secret": {machine.ClientSecret}})
	if st != 200 {
		t.Fatalf("client credentials: %d %v", st, own)
	}
	ownAT := own["access_token"].(string)
	narrowed := txIssued(t, "own stateless token narrowed", e.exchange(machine, url.Values{"subject_token": {ownAT},
		"subject_token_type": {txAccess}, "scope": {"openid"}}), txAccess)
	if r := dpopPost(t, e.base+"/oauth/v2/revoke", url.Values{"token": {ownAT}}, [2]string{machine.ClientID, machine.ClientSecret}); r.status != 200 {
		t.Fatalf("revoke: %d %s", r.status, r.raw)
	}
	if e.active(narrowed) {
		t.Error("token exchanged from a revoked stateless JWT still active")
	}
	e.must("PUT", "/management/v1/policies/security", e.admin, home, map[string]any{"enableImpersonation": true})
	// A replaced secret takes what it got with it.
	tok4 := txIssued(t, "impersonation, enabled again", e.exchange(machine, subject), txAccess)
	sec = e.must("PUT", "/management/v1/users/"+robot+"/secret", e.admin, home, nil)
	machine.ClientSecret = sec["clientSecret"].(string)
	if e.active(tok4) {
		t.Error("impersonated token still active after the impersonator's secret was replaced")
	}
	tok3 := txIssued(t, "impersonation with the new secret", e.exchange(machine, subject), txAccess)
	e.must("POST", "/management/v1/users/"+robot+"/_deactivate", e.admin, home, map[string]any{})
	if e.active(tok3) {
		t.Error("impersonated token still active after the impersonator was deactivated")
	}
	var n int
	if err := e.dirDB(t).QueryRow(`SELECT COUNT(*) FROM events WHERE event_type = 'user.token.exchanged' AND payload LIKE '%"impersonation":true%'`).Scan(&n); err != nil || n != 4 {
		t.Errorf("%d impersonation events (%v); want 4", n, err)
	}
}

func toStrings(v any) []string {
	switch x := v.(type) {
	case string:
		return []string{x}
	case []any:
		var out []string
		for _, s := range x {
			out = append(out, s.(string))
		}
		return out
	}
	return nil
}

// forgedJWT is an access token of the right shape signed by a key the
// server never published.
func forgedJWT(t *testing.T, issuer, sub, clientID string) string {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	s, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: k}, (&jose.SignerOptions{}).WithType("at+jwt"))
	if err != nil {
		t.Fatal(err)
	}
	payload, _ := json.Marshal(map[string]any{"iss": issuer, "sub": sub, "aud": []string{clientID}, "client_id": clientID,
		"jti": "forged", "exp": 4102444800, "iat": 1, "nbf": 1, "scope": "openid"})
	obj, err := s.Sign(payload)
	if err != nil {
		t.Fatal(err)
	}
	out, _ := obj.CompactSerialize()
	return strings.TrimSpace(out)
}

// TestMachineCredentialRemovalCutsTokens: a machine user's key or client
// secret is a credential; removing it revokes the tokens the machine user
// holds at once.
func TestMachineCredentialRemovalCutsTokens(t *testing.T) {
	t.Parallel()
	e := afStart(t)
	home := e.homeOrg()
	id, st, tok := e.machine(home, "keyed", nil, "openid")
	if st != 200 {
		t.Fatalf("JWT profile token: %d %v", st, tok)
	}
	at := tok["access_token"].(string)
	if e.userinfoStatus(at) != 200 {
		t.Fatal("fresh machine token inactive")
	}
	keys := e.must("POST", "/management/v1/users/"+id+"/keys/_search", e.admin, home, map[string]any{})["result"].([]any)
	e.must("DELETE", "/management/v1/users/"+id+"/keys/"+keys[0].(map[string]any)["id"].(string), e.admin, home, nil)
	if e.userinfoStatus(at) != 401 {
		t.Error("token still active after the key it was got with was removed")
	}

	sec := e.must("PUT", "/management/v1/users/"+id+"/secret", e.admin, home, nil)
	st, tok = postForm(t, e.base+"/oauth/v2/token", url.Values{"grant_type": {"client_credentials"}, "scope": {"openid"},
		"client_id": {sec["clientId"].(string)}, "client_secret": {sec["clientSecret"].(string)}})
	if st != 200 {
		t.Fatalf("client credentials: %d %v", st, tok)
	}
	at = tok["access_token"].(string)
	e.must("DELETE", "/management/v1/users/"+id+"/secret", e.admin, home, nil)
	if e.userinfoStatus(at) != 401 {
		t.Error("token still active after the secret it was got with was removed")
	}
}
