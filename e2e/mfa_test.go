package e2e

import (
	"html"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pquerna/otp/totp"
)

// The second factor through the real login pages: forced enrollment
// before any code reaches the client, TOTP and recovery codes at login,
// replay and wrong codes refused, amr/acr in ID tokens and introspection,
// sessions from before the policy stepped up, acr_values step-up and
// max_age re-running every step.

var (
	mfaSecretRE = regexp.MustCompile(`<code class="secret">([A-Z2-7 ]+)</code>`)
	// mfaRecoveryLinkRE is the code page's link to the recovery code form.
	mfaRecoveryLinkRE = regexp.MustCompile(`href="(/ui/login/mfa\?[^"]*recovery=1[^"]*)"`)
	mfaCodesRE        = regexp.MustCompile(`<li><code>([a-z0-9]{5}-[a-z0-9]{5})</code></li>`)
)

// loginPolicy replaces the organization's login policy.
func (e *afEnv) loginPolicy(body map[string]any) {
	e.t.Helper()
	body["allowUsernamePassword"] = true
	status, res := restJSON(e.t, "PUT", e.base+"/management/v1/policies/login", e.admin, body)
	if status == 404 || status == 409 || status == 400 {
		status, res = restJSON(e.t, "POST", e.base+"/management/v1/policies/login", e.admin, body)
	}
	if status != 200 {
		e.t.Fatalf("login policy: %d %v", status, res)
	}
}

// mfaClaims are the ID token's amr and acr.
type mfaClaims struct {
	AMR []string `json:"amr"`
	ACR string   `json:"acr"`
}

func (e *afEnv) mfaClaims(it afIDToken) mfaClaims {
	e.t.Helper()
	var c mfaClaims
	if err := it.Claims(&c); err != nil {
		e.t.Fatal(err)
	}
	return c
}

func mfaCode(t *testing.T, secret string, at time.Time) string {
	t.Helper()
	c, err := totp.GenerateCode(secret, at)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestMFATOTPAndRecoveryCodes(t *testing.T) {
	e := afStart(t)
	e.user("carol", afPassword, false)

	// bob signs in before the organization forces a second factor.
	bob := browser(t, e.base)
	e.signIn(bob, "bob", afBobPass, "bob1")

	e.loginPolicy(map[string]any{"forceMfa": true, "secondFactors": []string{"SECOND_FACTOR_TYPE_OTP"}})

	// alice must enroll before any code reaches the client.
	alice := browser(t, e.base)
	p := e.password(alice, afGet(t, alice, e.authURL("a1", "n-a1")), "alice", afPassword)
	if p.loc != nil || !afIs(p, "code") || !strings.Contains(p.body, "otpauth://totp/") || !strings.Contains(p.body, "<svg class=\"qr\"") {
		t.Fatalf("want the enrollment page with a QR code; got %d %v:\n%s", p.status, p.loc, p.body)
	}
	m := mfaSecretRE.FindStringSubmatch(p.body)
	if m == nil {
		t.Fatalf("no secret on the enrollment page:\n%s", p.body)
	}
	secret := strings.ReplaceAll(m[1], " ", "")
	// Reloading shows the same generator (the user may have scanned it).
	again := afGet(t, alice, e.base+"/ui/login/mfa/init?authRequestID="+afHidden(t, p, "authRequestID"))
	if !strings.Contains(again.body, m[0]) {
		t.Fatal("the enrollment page showed another secret when loaded again")
	}
	if wrong := afSubmit(t, alice, e.base, p, url.Values{"code": {"000000"}}); wrong.status != http.StatusUnauthorized || !afIs(wrong, "code") {
		t.Fatalf("a wrong enrollment code: %d %v", wrong.status, wrong.loc)
	}
	now := time.Now()
	p = afSubmit(t, alice, e.base, p, url.Values{"code": {mfaCode(t, secret, now)}})
	codes := mfaCodesRE.FindAllStringSubmatch(p.body, -1)
	if p.loc != nil || len(codes) != 10 {
		t.Fatalf("want the page with 10 recovery codes; got %d %v:\n%s", p.status, p.loc, p.body)
	}
	it := e.code(afSubmit(t, alice, e.base, p, url.Values{"continue": {"1"}}), "a1", "n-a1")
	c := e.mfaClaims(it)
	if !slices.Contains(c.AMR, "pwd") || !slices.Contains(c.AMR, "otp") || !slices.Contains(c.AMR, "mfa") || c.ACR != "urn:gatehouse:acr:mfa" {
		t.Fatalf("ID token amr %v acr %q; want pwd, otp, mfa and the mfa class", c.AMR, c.ACR)
	}
	in := e.introspection(it.access)
	if in["acr"] != "urn:gatehouse:acr:mfa" || !slices.Contains(anyStrings(in["amr"]), "mfa") {
		t.Fatalf("introspection %v; want amr with mfa and the mfa class", in)
	}
	// The session passed both factors: single sign-on answers at once.
	e.code(afGet(t, alice, e.authURL("a2", "n-a2")), "a2", "n-a2")

	t.Run("TOTP at login: replay and wrong codes refused", func(t *testing.T) {
		e := e.with(t)
		b := browser(t, e.base)
		p := e.password(b, afGet(t, b, e.authURL("a3", "n-a3")), "alice", afPassword)
		if !afIs(p, "code") || !strings.Contains(p.body, `name="type" value="otp"`) {
			t.Fatalf("want the code page; got %d %v:\n%s", p.status, p.loc, p.body)
		}
		for _, code := range []string{"000000", mfaCode(t, secret, now)} { // wrong; the enrollment's, spent
			r := afSubmit(t, b, e.base, p, url.Values{"code": {code}})
			if r.status != http.StatusUnauthorized || r.loc != nil {
				t.Fatalf("code %s: %d %v; want 401 on the page", code, r.status, r.loc)
			}
		}
		next := mfaCode(t, secret, now.Add(30*time.Second))
		e.code(afSubmit(t, b, e.base, p, url.Values{"code": {next}}), "a3", "n-a3")
		// The same code in another browser: refused.
		b2 := browser(t, e.base)
		p2 := e.password(b2, afGet(t, b2, e.authURL("a4", "n-a4")), "alice", afPassword)
		if r := afSubmit(t, b2, e.base, p2, url.Values{"code": {next}}); r.status != http.StatusUnauthorized {
			t.Fatalf("a code used once, again: %d %v", r.status, r.loc)
		}
	})

	t.Run("recovery code once", func(t *testing.T) {
		e := e.with(t)
		use := func(state string) afPage {
			b := browser(t, e.base)
			p := e.password(b, afGet(t, b, e.authURL(state, "n-"+state)), "alice", afPassword)
			// The code page's link: it carries the page's state.
			link := mfaRecoveryLinkRE.FindStringSubmatch(p.body)
			if link == nil {
				t.Fatalf("no recovery code link on the code page:\n%s", p.body)
			}
			p = afGet(t, b, e.base+html.UnescapeString(link[1]))
			if !strings.Contains(p.body, `name="type" value="recovery"`) {
				t.Fatalf("no recovery code form:\n%s", p.body)
			}
			return afSubmit(t, b, e.base, p, url.Values{"code": {strings.ToUpper(codes[0][1])}})
		}
		p := use("r1")
		if p.loc != nil || !strings.Contains(p.body, "9") {
			t.Fatalf("want the codes-left page; got %d %v:\n%s", p.status, p.loc, p.body)
		}
		if p = use("r2"); p.status != http.StatusUnauthorized {
			t.Fatalf("a recovery code used again: %d %v", p.status, p.loc)
		}
	})

	t.Run("a session from before the policy passes the second factor first", func(t *testing.T) {
		e := e.with(t)
		afErrorRedirect(t, afGet(t, bob, e.authURL("pn", "n-pn", "prompt", "none")), afRedirect, "interaction_required", "pn", false)
		p := afGet(t, bob, e.authURL("b2", "n-b2"))
		if p.loc != nil || !strings.Contains(p.body, "otpauth://totp/") {
			t.Fatalf("want bob's enrollment page, no code; got %d %v:\n%s", p.status, p.loc, p.body)
		}
	})

	t.Run("acr_values steps up, max_age re-runs every step", func(t *testing.T) {
		e := e.with(t)
		e.loginPolicy(map[string]any{"forceMfa": false})
		b := browser(t, e.base)
		c := e.mfaClaims(e.signIn(b, "carol", afPassword, "c1"))
		if c.ACR != "urn:gatehouse:acr:password" || slices.Contains(c.AMR, "mfa") {
			t.Fatalf("carol's password login: amr %v acr %q", c.AMR, c.ACR)
		}
		afErrorRedirect(t, afGet(t, b, e.authURL("pn", "n-pn", "prompt", "none", "acr_values", "urn:gatehouse:acr:mfa")),
			afRedirect, "unmet_authentication_requirements", "pn", false)
		p := afGet(t, b, e.authURL("c2", "n-c2", "acr_values", "urn:gatehouse:acr:mfa"))
		if p.loc != nil || !strings.Contains(p.body, "otpauth://totp/") {
			t.Fatalf("acr_values mfa without a factor: want enrollment; got %d %v", p.status, p.loc)
		}
		// alice's mfa session, max_age=0: password, then the code again.
		p = afGet(t, alice, e.authURL("a5", "n-a5", "max_age", "0"))
		if !afIs(p, "password") {
			t.Fatalf("max_age=0: want the password page; got %d %v", p.status, p.loc)
		}
		p = afSubmit(t, alice, e.base, p, url.Values{"password": {afPassword}})
		if !afIs(p, "code") || p.loc != nil {
			t.Fatalf("max_age=0 after the password: want the code page; got %d %v", p.status, p.loc)
		}
	})
}

// afHidden is the value of a hidden field of p's form.
func afHidden(t *testing.T, p afPage, name string) string {
	t.Helper()
	for _, h := range afHiddenRE.FindAllStringSubmatch(p.body, -1) {
		if h[1] == name {
			return h[2]
		}
	}
	t.Fatalf("no hidden %s on the page:\n%s", name, p.body)
	return ""
}

func anyStrings(v any) []string {
	var out []string
	if vs, ok := v.([]any); ok {
		for _, x := range vs {
			if s, ok := x.(string); ok {
				out = append(out, s)
			}
		}
	}
	return out
}
