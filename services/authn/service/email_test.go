package service_test

import (
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/gatehouse-id/gatehouse/pkg/db"
)

// The pages of verification and invitation links: a wrong code is
// refused, the GET changes nothing, the POST needs the CSRF token, and the
// code works once; the invitation's password follows the policy.
func TestEmailLinkPages(t *testing.T) {
	t.Parallel()
	e := newEnv(t, db.SQLite)
	e.dir.EmailCodes = map[string]string{"alice-id": "mail-code"}
	e.dir.InitCodes = map[string]string{"alice-id": "init-code"}

	if r := e.get("/ui/login/mail/verification?userID=alice-id&code=wrong"); r.StatusCode != http.StatusBadRequest {
		t.Fatalf("a wrong code: %d", r.StatusCode)
	}
	vp := e.get("/ui/login/mail/verification?userID=alice-id&code=mail-code&ui_locales=de")
	if vp.StatusCode != http.StatusOK || !strings.Contains(vp.body, "Adresse bestätigen") || len(e.dir.Verified) != 0 {
		t.Fatalf("the link's page: %d, verified %v:\n%s", vp.StatusCode, e.dir.Verified, vp.body)
	}
	if r := e.post("/ui/login/mail/verification", url.Values{"userID": {"alice-id"}, "code": {"mail-code"}}); r.StatusCode != http.StatusForbidden {
		t.Fatalf("a confirmation without the CSRF token: %d", r.StatusCode)
	}
	if done := e.submit(vp, url.Values{}); done.StatusCode != http.StatusOK || !strings.Contains(done.body, "ist bestätigt") ||
		!slices.Equal(e.dir.Verified, []string{"alice-id"}) {
		t.Fatalf("the confirmation: %d, verified %v:\n%s", done.StatusCode, e.dir.Verified, done.body)
	}
	if r := e.submit(vp, url.Values{}); r.StatusCode != http.StatusBadRequest {
		t.Fatalf("the code a second time: %d", r.StatusCode)
	}

	ip := e.get("/ui/login/user/init?userID=alice-id&code=init-code")
	if ip.StatusCode != http.StatusOK || !strings.Contains(ip.body, `name="newPassword"`) {
		t.Fatalf("the invitation's page: %d:\n%s", ip.StatusCode, ip.body)
	}
	if r := e.submit(ip, url.Values{"newPassword": {"weak"}, "confirmPassword": {"weak"}}); r.StatusCode != http.StatusBadRequest {
		t.Fatalf("a password against the policy: %d", r.StatusCode)
	}
	done := e.submit(ip, url.Values{"newPassword": {"Alice-F1rst-1"}, "confirmPassword": {"Alice-F1rst-1"}})
	if done.StatusCode != http.StatusOK || !strings.Contains(done.body, "Your password is set") || e.dir.Users["alice-id"].Password != "Alice-F1rst-1" {
		t.Fatalf("the first password: %d:\n%s", done.StatusCode, done.body)
	}
	if r := e.get("/ui/login/user/init?userID=alice-id&code=init-code"); r.StatusCode != http.StatusBadRequest {
		t.Fatalf("the invitation a second time: %d", r.StatusCode)
	}
}

// The login policy's require_verified_email: a user whose address is not
// verified gets a mailed code and no authorization code until it enters
// it (or follows the link and continues); a verified user passes.
func TestRequireVerifiedEmail(t *testing.T) {
	t.Parallel()
	e := newEnv(t, db.SQLite)
	e.dir.Orgs["org1"].LoginPolicy.RequireVerifiedEmail = true
	e.dir.EmailCodes = map[string]string{"alice-id": "mail-code"}
	e.dir.Users["alice-id"].User.Email = "alice@example.com"
	page := e.passwordPage(codeParams(), "alice")
	step := e.submit(page, url.Values{"password": {"Alice-Pass-1"}})
	if step.StatusCode != http.StatusSeeOther || !strings.HasPrefix(step.Header.Get("Location"), "/ui/login/mail/code?") {
		t.Fatalf("after the password: %d %s; want the verification step", step.StatusCode, step.Header.Get("Location"))
	}
	if !slices.Equal(e.dir.CodesSent, []string{"alice-id"}) {
		t.Fatalf("codes sent %v; want one to alice", e.dir.CodesSent)
	}
	cp := e.follow(step)
	if cp.StatusCode != http.StatusOK || !strings.Contains(cp.body, `name="code"`) {
		t.Fatalf("the step's page: %d:\n%s", cp.StatusCode, cp.body)
	}
	if r := e.submit(cp, url.Values{"code": {"wrong"}}); r.StatusCode != http.StatusBadRequest {
		t.Fatalf("a wrong code: %d", r.StatusCode)
	}
	if r := e.submit(cp, url.Values{}); r.StatusCode != http.StatusBadRequest {
		t.Fatalf("continuing unverified: %d", r.StatusCode)
	}
	if r := e.submit(cp, url.Values{"resend": {"1"}}); r.StatusCode != http.StatusOK || len(e.dir.CodesSent) != 2 {
		t.Fatalf("send again: %d, sent %v", r.StatusCode, e.dir.CodesSent)
	}
	r := e.submit(cp, url.Values{"code": {"mail-code"}})
	if r.StatusCode != http.StatusFound {
		t.Fatalf("the right code: %d:\n%s", r.StatusCode, r.body)
	}
	e.code(r.location(), "st-1")

	// Verified now: the next sign-in has no step.
	e.newBrowser()
	e.code(e.login(codeParams(), "alice", "Alice-Pass-1"), "st-1")
}
