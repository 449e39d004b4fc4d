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
