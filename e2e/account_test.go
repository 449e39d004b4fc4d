package e2e

import (
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gatehouse-id/gatehouse/pkg/testutil/webauthntest"
)

// The account page (/ui/account) through the real pages: it signs the
// user in first, then adds an authenticator app, a security key and a
// passkey, removes a factor, makes new recovery codes, changes the
// password, and signs out everywhere, which ends the user's other
// sessions and revokes its tokens.

// accountPost posts one of the account page's buttons.
func accountPost(t *testing.T, c *http.Client, base string, p afPage, fields url.Values) afPage {
	t.Helper()
	return accountPostTo(t, c, base, "/ui/account", p, fields)
}

// accountPostTo posts one of the account page's buttons to path.
func accountPostTo(t *testing.T, c *http.Client, base, path string, p afPage, fields url.Values) afPage {
	t.Helper()
	fields.Set("csrf", afHidden(t, p, "csrf"))
	req, err := http.NewRequest(http.MethodPost, base+path, strings.NewReader(fields.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	return afDo(t, c, req)
}

func TestAccountPage(t *testing.T) {
	e := afStartLocalhost(t)
	e.loginPolicy(map[string]any{"passwordlessType": "PASSWORDLESS_TYPE_ALLOWED"})
	b := browser(t, e.base)

	// Not signed in: the account page signs the user in, then shows.
	p := afGet(t, b, e.base+"/ui/account")
	if !afIs(p, "loginName") {
		t.Fatalf("want the login page first; got %d %v:\n%s", p.status, p.loc, p.body)
	}
	p = e.password(b, p, "alice", afPassword)
	if p.status != http.StatusOK || !strings.Contains(p.body, "Your account") || !strings.Contains(p.body, "alice@") {
		t.Fatalf("want alice's account page after the sign-in; got %d %v:\n%s", p.status, p.loc, p.body)
	}
	if strings.Contains(p.body, "<script") {
		t.Fatal("the account page loads a script; only WebAuthn ceremonies may")
	}
	// Another application's session of alice, to see it end later.
	other := browser(t, e.base)
	it := e.signIn(other, "alice", afPassword, "acc1")

	// A form without the browser's CSRF token changes nothing.
	if r := afSubmit(t, b, e.base, afPage{body: `<form method="post" action="/ui/account">`}, url.Values{"action": {"signout"}}); r.status != http.StatusForbidden {
		t.Fatalf("a post without the CSRF token: %d; want 403", r.status)
	}

	// An authenticator app: the QR code page, then a code; the first
	// factor brings recovery codes.
	// Adding a factor starts with a POST; a GET changes nothing.
	if g := afGet(t, b, e.base+"/ui/account/totp"); g.status != http.StatusOK || !strings.Contains(g.body, "Your account") || mfaSecretRE.MatchString(g.body) {
		t.Fatalf("GET of the authenticator app's page: %d:\n%s\nwant the account page, no registration", g.status, g.body)
	}
	p = accountPostTo(t, b, e.base, "/ui/account/totp", p, url.Values{"start": {"1"}})
	m := mfaSecretRE.FindStringSubmatch(p.body)
	if m == nil {
		t.Fatalf("no secret on the page:\n%s", p.body)
	}
	secret := strings.ReplaceAll(m[1], " ", "")
	p = afSubmit(t, b, e.base, p, url.Values{"code": {mfaCode(t, secret, time.Now())}})
	if n := len(mfaCodesRE.FindAllStringSubmatch(p.body, -1)); n != 10 {
		t.Fatalf("want 10 recovery codes after the first factor; got %d:\n%s", n, p.body)
	}

	// A security key and a passkey, named.
	key := &webauthntest.Authenticator{Origin: e.base}
	p = accountPostTo(t, b, e.base, "/ui/account/key", afGet(t, b, e.base+"/ui/account"), url.Values{"start": {"1"}, "type": {"u2f"}})
	p, _ = waAnswerNamed(t, b, e.base, p, key, "YubiKey 5")
	pk := &webauthntest.Authenticator{Origin: e.base, UV: true}
	p = accountPostTo(t, b, e.base, "/ui/account/key", p, url.Values{"start": {"1"}, "type": {"passwordless"}})
	p, cred := waAnswerNamed(t, b, e.base, p, pk, "Laptop")
	for _, want := range []string{"Authenticator app", "Security key: YubiKey 5", "Passkey: Laptop", "The factor was added."} {
		if !strings.Contains(p.body, want) {
			t.Fatalf("the account page lacks %q:\n%s", want, p.body)
		}
	}
	// The passkey signs alice in elsewhere, without a password.
	pb := browser(t, e.base)
	lp := afGet(t, pb, e.authURL("acc2", "n-acc2"))
	lp = afGet(t, pb, e.base+"/ui/login/passkey?authRequestID="+afHidden(t, lp, "authRequestID"))
	done, _ := waAnswer(t, pb, e.base, lp, pk, cred)
	passkeyToken := e.code(done, "acc2", "n-acc2")

	// Remove the authenticator app; make new recovery codes.
	id := regexpFind(t, p.body, `name="type" value="otp"><input type="hidden" name="id" value="([^"]+)"`)
	p = accountPost(t, b, e.base, p, url.Values{"action": {"remove"}, "type": {"otp"}, "id": {id}})
	if !strings.Contains(p.body, "The factor was removed.") || strings.Contains(p.body, "Authenticator app:") {
		t.Fatalf("after removing the app:\n%s", p.body)
	}
	codes := accountPost(t, b, e.base, p, url.Values{"action": {"recovery"}})
	if n := len(mfaCodesRE.FindAllStringSubmatch(codes.body, -1)); n != 10 {
		t.Fatalf("new recovery codes: %d:\n%s", n, codes.body)
	}

	// The password: a wrong current one is refused; then it changes.
	pp := afGet(t, b, e.base+"/ui/account/password")
	if r := afSubmit(t, b, e.base, pp, url.Values{"currentPassword": {"wrong"}, "newPassword": {"Alice-N3w-Passw0rd!"},
		"confirmPassword": {"Alice-N3w-Passw0rd!"}}); r.status != http.StatusUnauthorized {
		t.Fatalf("a wrong current password: %d", r.status)
	}
	p = afSubmit(t, b, e.base, pp, url.Values{"currentPassword": {afPassword}, "newPassword": {"Alice-N3w-Passw0rd!"},
		"confirmPassword": {"Alice-N3w-Passw0rd!"}})
	if !strings.Contains(p.body, "Your password was changed.") {
		t.Fatalf("after the password change: %d:\n%s", p.status, p.body)
	}

	// Sign out everywhere: every session ends and every token is revoked.
	out := accountPost(t, b, e.base, p, url.Values{"action": {"signout"}})
	if out.status != http.StatusOK || !strings.Contains(out.body, "signed out") {
		t.Fatalf("sign out everywhere: %d:\n%s", out.status, out.body)
	}
	for name, c := range map[string]*http.Client{"this browser": b, "the other browser": other, "the passkey's browser": pb} {
		if p := afGet(t, c, e.authURL("acc3", "n-acc3")); !afIs(p, "loginName") && !afIs(p, "password") {
			t.Fatalf("%s still signed in after signing out everywhere: %d %v", name, p.status, p.loc)
		}
	}
	for _, tok := range []string{it.access, passkeyToken.access} {
		if s := e.userinfoStatus(tok); s != http.StatusUnauthorized {
			t.Fatalf("a token outlived signing out everywhere: userinfo %d", s)
		}
	}
	if p := afGet(t, b, e.base+"/ui/account"); !afIs(p, "loginName") {
		t.Fatalf("the account page after signing out: %d %v", p.status, p.loc)
	}
}

// waAnswerNamed answers a registration page's ceremony with a name.
func waAnswerNamed(t *testing.T, c *http.Client, base string, p afPage, a *webauthntest.Authenticator, name string) (afPage, *webauthntest.Credential) {
	t.Helper()
	resp, cred, err := a.Create(waOptions(t, p))
	if err != nil {
		t.Fatal(err)
	}
	return afSubmit(t, c, base, p, url.Values{"credential": {string(resp)}, "name": {name}}), cred
}

// regexpFind returns the first group of pattern in s.
func regexpFind(t *testing.T, s, pattern string) string {
	t.Helper()
	m := regexp.MustCompile(pattern).FindStringSubmatch(s)
	if m == nil {
		t.Fatalf("%s not found in:\n%s", pattern, s)
	}
	return m[1]
}
