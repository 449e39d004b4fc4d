package e2e

import (
	"encoding/json"
	"html"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/gatehouse-id/gatehouse/pkg/config"
	"github.com/gatehouse-id/gatehouse/pkg/testutil/webauthntest"
)

// Security keys and passkeys through the real login pages, with a
// software authenticator in place of the browser's (the browser test
// drives Chromium's virtual one): a security key as the second factor, a
// passkey signing in without a password, a security key enrolled where
// the policy forces a second factor, and what an admin's removal cuts.
// WebAuthn needs a host name, so these servers' issuer is
// http://localhost:PORT.

var waOptionsRE = regexp.MustCompile(`data-webauthn="([^"]+)"`)

// afStartLocalhost is afStart with the issuer http://localhost:PORT.
func afStartLocalhost(t *testing.T) *afEnv {
	t.Helper()
	dir, addr := t.TempDir(), freeAddr(t)
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	issuer := "http://localhost:" + port
	startProc(t, config.RoleEdge, map[string]string{
		"GATEHOUSE_DATA_DIR": dir, "GATEHOUSE_ADDR": addr, "GATEHOUSE_ISSUER": issuer,
		"GATEHOUSE_ADMIN_PASSWORD": "Admin-Passw0rd-for-e2e",
	})
	return afSetup(t, issuer, dir)
}

// waOptions are the ceremony options a WebAuthn page carries.
func waOptions(t *testing.T, p afPage) []byte {
	t.Helper()
	m := waOptionsRE.FindStringSubmatch(p.body)
	if m == nil {
		t.Fatalf("no WebAuthn ceremony on the page (status %d):\n%s", p.status, p.body)
	}
	return []byte(html.UnescapeString(m[1]))
}

// waAnswer answers the page's ceremony as the browser would: the form
// posted with the credential (a new one for "create", an assertion by
// cred for "get").
func waAnswer(t *testing.T, c *http.Client, base string, p afPage, a *webauthntest.Authenticator, cred *webauthntest.Credential) (afPage, *webauthntest.Credential) {
	t.Helper()
	opts := waOptions(t, p)
	var resp []byte
	var err error
	if strings.Contains(p.body, `data-ceremony="create"`) {
		resp, cred, err = a.Create(opts)
	} else {
		resp, err = a.Get(opts, cred)
	}
	if err != nil {
		t.Fatal(err)
	}
	return afSubmit(t, c, base, p, url.Values{"credential": {string(resp)}}), cred
}

// register registers a security key ("u2f") or passkey ("passkeys") for
// the user through the v2 user service, as the admin.
func (e *afEnv) register(userID, kind string, a *webauthntest.Authenticator) *webauthntest.Credential {
	e.t.Helper()
	idField, nameField := "u2fId", "tokenName"
	if kind == "passkeys" {
		idField, nameField = "passkeyId", "passkeyName"
	}
	status, reg := restJSON(e.t, "POST", e.base+"/v2/users/"+userID+"/"+kind, e.admin, map[string]any{"domain": "localhost"})
	if status != 200 {
		e.t.Fatalf("register %s: %d %v", kind, status, reg)
	}
	opts, err := json.Marshal(reg["publicKeyCredentialCreationOptions"])
	if err != nil {
		e.t.Fatal(err)
	}
	resp, cred, err := a.Create(opts)
	if err != nil {
		e.t.Fatal(err)
	}
	var body map[string]any
	if err := json.Unmarshal(resp, &body); err != nil {
		e.t.Fatal(err)
	}
	status, res := restJSON(e.t, "POST", e.base+"/v2/users/"+userID+"/"+kind+"/"+reg[idField].(string), e.admin,
		map[string]any{"publicKeyCredential": body, nameField: "test key"})
	if status != 200 {
		e.t.Fatalf("verify %s: %d %v", kind, status, res)
	}
	return cred
}

func TestWebAuthnSecurityKeyAndPasskey(t *testing.T) {
	e := afStartLocalhost(t)
	key := &webauthntest.Authenticator{Origin: e.base}
	aliceKey := e.register(e.users["alice"], "u2f", key)

	// alice: password, then her security key; the code page is not shown
	// (she has no TOTP generator).
	alice := browser(t, e.base)
	p := e.password(alice, afGet(t, alice, e.authURL("k1", "n-k1")), "alice", afPassword)
	if !strings.Contains(p.body, `<script src="/ui/login/resources/webauthn.js" nonce="`) {
		t.Fatalf("want the security key page with the ceremony script; got %d:\n%s", p.status, p.body)
	}
	// A refused assertion (another origin) reads like a wrong code, and
	// asks again with a new challenge.
	wrong, _ := waAnswer(t, alice, e.base, p, &webauthntest.Authenticator{Origin: "https://evil.example"}, aliceKey)
	if wrong.status != http.StatusUnauthorized || wrong.loc != nil {
		t.Fatalf("assertion from another origin: %d %v", wrong.status, wrong.loc)
	}
	done, _ := waAnswer(t, alice, e.base, wrong, key, aliceKey)
	it := e.code(done, "k1", "n-k1")
	if c := e.mfaClaims(it); !slices.Contains(c.AMR, "pwd") || !slices.Contains(c.AMR, "hwk") || !slices.Contains(c.AMR, "mfa") ||
		c.ACR != "urn:gatehouse:acr:phr" {
		t.Fatalf("ID token amr %v acr %q; want pwd, hwk, mfa and the phishing-resistant class", c.AMR, c.ACR)
	}
	if in := e.introspection(it.access); in["acr"] != "urn:gatehouse:acr:phr" {
		t.Fatalf("introspection %v; want the phishing-resistant class", in)
	}

	t.Run("an assertion works once", func(t *testing.T) {
		e := e.with(t)
		b := browser(t, e.base)
		p := e.password(b, afGet(t, b, e.authURL("k2", "n-k2")), "alice", afPassword)
		opts := waOptions(t, p)
		resp, err := key.Get(opts, aliceKey)
		if err != nil {
			t.Fatal(err)
		}
		first := afSubmit(t, b, e.base, p, url.Values{"credential": {string(resp)}})
		e.code(first, "k2", "n-k2")
		b2 := browser(t, e.base)
		p2 := e.password(b2, afGet(t, b2, e.authURL("k3", "n-k3")), "alice", afPassword)
		if r := afSubmit(t, b2, e.base, p2, url.Values{"credential": {string(resp)}}); r.status != http.StatusUnauthorized || r.loc != nil {
			t.Fatalf("a replayed assertion: %d %v; want 401", r.status, r.loc)
		}
	})

	t.Run("passkey sign-in without a password", func(t *testing.T) {
		e := e.with(t)
		pk := &webauthntest.Authenticator{Origin: e.base, UV: true}
		bobKey := e.register(e.users["bob"], "passkeys", pk)
		b := browser(t, e.base)
		if p := afGet(t, b, e.authURL("p0", "n-p0")); strings.Contains(p.body, "/ui/login/passkey") {
			t.Fatal("the passkey entry shows while the policy does not allow passwordless sign-in")
		}
		e.loginPolicy(map[string]any{"passwordlessType": "PASSWORDLESS_TYPE_ALLOWED"})
		p := afGet(t, b, e.authURL("p1", "n-p1"))
		rid := afHidden(t, p, "authRequestID")
		if !strings.Contains(p.body, "/ui/login/passkey?authRequestID="+rid) {
			t.Fatalf("no passkey entry on the login page:\n%s", p.body)
		}
		p = afGet(t, b, e.base+"/ui/login/passkey?authRequestID="+rid)
		// Without user verification a passkey does not sign in.
		if r, _ := waAnswer(t, b, e.base, p, &webauthntest.Authenticator{Origin: e.base}, bobKey); r.status != http.StatusUnauthorized {
			t.Fatalf("passkey without user verification: %d %v", r.status, r.loc)
		} else {
			p = r
		}
		done, _ := waAnswer(t, b, e.base, p, pk, bobKey)
		it := e.code(done, "p1", "n-p1")
		if it.Subject != e.users["bob"] {
			t.Fatalf("signed in %s; want bob", it.Subject)
		}
		if c := e.mfaClaims(it); slices.Contains(c.AMR, "pwd") || !slices.Contains(c.AMR, "swk") || !slices.Contains(c.AMR, "user") ||
			c.ACR != "urn:gatehouse:acr:phr" {
			t.Fatalf("ID token amr %v acr %q; want swk and user without pwd, phishing-resistant", c.AMR, c.ACR)
		}
		// alice's security key is no passkey.
		b2 := browser(t, e.base)
		p = afGet(t, b2, e.authURL("p2", "n-p2"))
		p = afGet(t, b2, e.base+"/ui/login/passkey?authRequestID="+afHidden(t, p, "authRequestID"))
		if r, _ := waAnswer(t, b2, e.base, p, key, aliceKey); r.status != http.StatusUnauthorized {
			t.Fatalf("a security key as a passkey: %d %v", r.status, r.loc)
		}

		// A deactivated user's passkey signs in no more.
		if status, res := restJSON(t, "POST", e.base+"/management/v1/users/"+e.users["bob"]+"/_deactivate", e.admin, map[string]any{}); status != 200 {
			t.Fatalf("DeactivateUser: %d %v", status, res)
		}
		b3 := browser(t, e.base)
		p = afGet(t, b3, e.authURL("p5", "n-p5"))
		p = afGet(t, b3, e.base+"/ui/login/passkey?authRequestID="+afHidden(t, p, "authRequestID"))
		if r, _ := waAnswer(t, b3, e.base, p, pk, bobKey); r.status != http.StatusUnauthorized || r.loc != nil {
			t.Fatalf("a deactivated user's passkey: %d %v", r.status, r.loc)
		}
		if status, res := restJSON(t, "POST", e.base+"/management/v1/users/"+e.users["bob"]+"/_reactivate", e.admin, map[string]any{}); status != 200 {
			t.Fatalf("ReactivateUser: %d %v", status, res)
		}
		it = e.code(func() afPage {
			p := afGet(t, b3, e.authURL("p6", "n-p6"))
			p = afGet(t, b3, e.base+"/ui/login/passkey?authRequestID="+afHidden(t, p, "authRequestID"))
			done, _ := waAnswer(t, b3, e.base, p, pk, bobKey)
			return done
		}(), "p6", "n-p6")
		b = b3

		// The admin removes bob's passkey: his session ends, the key signs
		// in no more.
		status, res := restJSON(t, "POST", e.base+"/management/v1/users/"+e.users["bob"]+"/passwordless/_search", e.admin, nil)
		list, _ := res["result"].([]any)
		if status != 200 || len(list) != 1 {
			t.Fatalf("ListHumanPasswordless: %d %v", status, res)
		}
		id := list[0].(map[string]any)["id"].(string)
		if status, res := restJSON(t, "DELETE", e.base+"/management/v1/users/"+e.users["bob"]+"/passwordless/"+id, e.admin, nil); status != 200 {
			t.Fatalf("RemoveHumanPasswordless: %d %v", status, res)
		}
		if p := afGet(t, b, e.authURL("p3", "n-p3")); !afIs(p, "loginName") {
			t.Fatalf("bob's session outlived the removal of his passkey: %d %v", p.status, p.loc)
		}
		if e.userinfoStatus(it.access) != http.StatusUnauthorized {
			t.Fatal("bob's access token outlived the removal of his passkey")
		}
		p = afGet(t, b, e.authURL("p4", "n-p4"))
		p = afGet(t, b, e.base+"/ui/login/passkey?authRequestID="+afHidden(t, p, "authRequestID"))
		if r, _ := waAnswer(t, b, e.base, p, pk, bobKey); r.status != http.StatusUnauthorized {
			t.Fatalf("a removed passkey: %d %v", r.status, r.loc)
		}
	})

	t.Run("forced enrollment with a security key", func(t *testing.T) {
		e := e.with(t)
		e.user("dave", afPassword, false)
		e.loginPolicy(map[string]any{"forceMfa": true, "passwordlessType": "PASSWORDLESS_TYPE_ALLOWED"})
		// Updates keep the factor lists (ZITADEL's rule): their own calls.
		if status, res := restJSON(t, "POST", e.base+"/management/v1/policies/login/second_factors", e.admin,
			map[string]any{"type": "SECOND_FACTOR_TYPE_U2F"}); status != 200 {
			t.Fatalf("AddSecondFactorToLoginPolicy: %d %v", status, res)
		}
		b := browser(t, e.base)
		p := e.password(b, afGet(t, b, e.authURL("f1", "n-f1")), "dave", afPassword)
		if !strings.Contains(p.body, `data-ceremony="create"`) || strings.Contains(p.body, "otpauth://") {
			t.Fatalf("want the security key enrollment (the policy lists only U2F); got %d:\n%s", p.status, p.body)
		}
		dk := &webauthntest.Authenticator{Origin: e.base}
		codes, _ := waAnswer(t, b, e.base, p, dk, nil)
		if n := len(mfaCodesRE.FindAllStringSubmatch(codes.body, -1)); codes.loc != nil || n != 10 {
			t.Fatalf("want the page with 10 recovery codes; got %d %v:\n%s", codes.status, codes.loc, codes.body)
		}
		it := e.code(afSubmit(t, b, e.base, codes, url.Values{"continue": {"1"}}), "f1", "n-f1")
		if c := e.mfaClaims(it); !slices.Contains(c.AMR, "hwk") || !slices.Contains(c.AMR, "mfa") {
			t.Fatalf("amr %v after enrolling a security key", c.AMR)
		}
		status, res := restJSON(t, "POST", e.base+"/management/v1/users/"+e.users["dave"]+"/auth_factors/_search", e.admin, nil)
		list, _ := res["result"].([]any)
		if status != 200 || len(list) != 1 || list[0].(map[string]any)["u2f"] == nil {
			t.Fatalf("dave's factors: %d %v; want one security key", status, res)
		}
	})
}

func TestWebAuthnNeedsAHostName(t *testing.T) {
	e := afStart(t) // issuer http://127.0.0.1:PORT
	e.loginPolicy(map[string]any{"passwordlessType": "PASSWORDLESS_TYPE_ALLOWED"})
	b := browser(t, e.base)
	p := afGet(t, b, e.authURL("n1", "n-n1"))
	if strings.Contains(p.body, "/ui/login/passkey") {
		t.Fatal("the passkey entry shows on an IP issuer")
	}
	status, res := restJSON(t, "POST", e.base+"/v2/users/"+e.users["alice"]+"/passkeys", e.admin, map[string]any{})
	if status != http.StatusConflict || !strings.Contains(res["message"].(string), "IP address") {
		t.Fatalf("RegisterPasskey on an IP issuer: %d %v; want 409 saying why", status, res)
	}
}
