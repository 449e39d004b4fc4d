package service_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/gatehouse-id/gatehouse/pkg/db"
	"github.com/gatehouse-id/gatehouse/services/authn/internal/session"
)

// enterCode opens /device and submits typed; it returns the answer.
func (e *env) enterCode(typed string) response {
	e.t.Helper()
	page := e.get("/device?user_code=" + url.QueryEscape(typed))
	if page.StatusCode != 200 || !strings.Contains(page.body, `value="`+typed+`"`) {
		e.t.Fatalf("device page: %d\n%s", page.StatusCode, page.body)
	}
	return e.submit(page, url.Values{"userCode": {typed}})
}

// TestDevicePages: the code page, the sign-in, the consent page with the
// code, and the decision recorded for the device with the session's login.
func TestDevicePages(t *testing.T) {
	t.Parallel()
	e := newEnv(t, db.SQLite)
	approveID := e.tok.AddDevice("BCDF-GHJK", "web", "openid", "profile")
	denyID := e.tok.AddDevice("LMNP-QRST", "web", "openid")

	// Typed in lower case without the dash (the fake matches case only;
	// tokens normalizes the rest).
	page := e.follow(e.enterCode("bcdf-ghjk"))
	if !strings.Contains(page.body, `name="loginName"`) {
		t.Fatalf("want the login page: %d\n%s", page.StatusCode, page.body)
	}
	page = e.follow(e.submit(page, url.Values{"loginName": {"alice"}}))
	page = e.follow(e.submit(page, url.Values{"password": {"Alice-Pass-1"}}))
	if !strings.Contains(page.body, "BCDF-GHJK") || !strings.Contains(page.body, "Web App") || !strings.Contains(page.body, "Sign in on a device") {
		t.Fatalf("consent page: %d\n%s", page.StatusCode, page.body)
	}
	if e.tok.Decision(approveID) != nil {
		t.Fatal("decided before the person allowed it")
	}
	r := e.submit(page, url.Values{"decision": {"accept"}})
	if loc := r.Header.Get("Location"); r.StatusCode != http.StatusFound || !strings.HasPrefix(loc, "/device/done?result=approved") {
		t.Fatalf("after Allow: %d %q\n%s", r.StatusCode, loc, r.body)
	}
	d := e.tok.Decision(approveID)
	if d == nil || !d.GetApprove() || d.GetUserId() != "alice-id" || d.GetOrgId() != "org1" || d.GetSessionId() == "" ||
		len(d.GetAmr()) == 0 || d.GetAuthTime() == nil {
		t.Fatalf("decision %v", d)
	}
	if done := e.follow(r); !strings.Contains(done.body, "Your device is signed in") {
		t.Fatalf("done page:\n%s", done.body)
	}

	// A signed-in browser goes from the code straight to the consent page.
	page = e.follow(e.enterCode("LMNP-QRST"))
	if !strings.Contains(page.body, "LMNP-QRST") || !strings.Contains(page.body, `value="deny"`) {
		t.Fatalf("consent page for a signed-in browser: %d\n%s", page.StatusCode, page.body)
	}
	r = e.submit(page, url.Values{"decision": {"deny"}})
	if d := e.tok.Decision(denyID); d == nil || d.GetApprove() || !strings.Contains(r.Header.Get("Location"), "result=denied") {
		t.Fatalf("denial: %v, %q", d, r.Header.Get("Location"))
	}
	// A code works once.
	if r := e.enterCode("BCDF-GHJK"); r.StatusCode != 400 || !strings.Contains(r.body, "unknown, expired or was used") {
		t.Fatalf("a used code: %d\n%s", r.StatusCode, r.body)
	}
}

// TestDevicePageRefusals: no cookie, a wrong CSRF token, too many wrong
// codes from one browser (another browser is not affected), and a code of
// a client that is no longer an active OIDC app.
func TestDevicePageRefusals(t *testing.T) {
	t.Parallel()
	e := newEnv(t, db.SQLite)
	e.tok.AddDevice("BCDF-GHJK", "web", "openid")
	offID := e.tok.AddDevice("VWXZ-BCDF", "off", "openid")

	if r := e.post("/device", url.Values{"userCode": {"BCDF-GHJK"}, "csrf": {"x"}}); r.StatusCode != 400 {
		t.Fatalf("no cookie: %d", r.StatusCode)
	}
	page := e.get("/device")
	if r := e.post("/device", url.Values{"userCode": {"BCDF-GHJK"}, "csrf": {"forged"}}); r.StatusCode != 403 {
		t.Fatalf("wrong csrf: %d\n%s", r.StatusCode, r.body)
	}
	for i := range session.DeviceAttempts {
		r := e.submit(page, url.Values{"userCode": {"ZZZZ-ZZZZ"}})
		if r.StatusCode != 400 || !strings.Contains(r.body, "unknown, expired or was used") {
			t.Fatalf("wrong code %d: %d\n%s", i, r.StatusCode, r.body)
		}
	}
	if r := e.submit(page, url.Values{"userCode": {"BCDF-GHJK"}}); r.StatusCode != http.StatusTooManyRequests ||
		!strings.Contains(r.body, "Too many wrong codes") {
		t.Fatalf("sixth attempt: %d\n%s", r.StatusCode, r.body)
	}
	e.newBrowser()
	if r := e.follow(e.enterCode("BCDF-GHJK")); !strings.Contains(r.body, `name="loginName"`) {
		t.Fatalf("another browser: %d\n%s", r.StatusCode, r.body)
	}
	if r := e.enterCode("VWXZ-BCDF"); r.StatusCode != 400 || r.Header.Get("Location") != "" || e.tok.Decision(offID) != nil {
		t.Fatalf("inactive client: %d %q\n%s", r.StatusCode, r.Header.Get("Location"), r.body)
	}
}
