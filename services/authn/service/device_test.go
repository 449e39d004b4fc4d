package service_test

import (
	"context"
	"errors"
	"html/template"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"

	"connectrpc.com/connect"

	"github.com/gatehouse-id/gatehouse/pkg/db"
	tokensv1 "github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/tokens/v1"
	"github.com/gatehouse-id/gatehouse/services/authn/internal/authntest"
	"github.com/gatehouse-id/gatehouse/services/authn/internal/session"
	"github.com/gatehouse-id/gatehouse/services/authn/service"
)

// The texts the device pages show (i18n.go, en and de).
const (
	deviceInvalid   = "This code is unknown, expired or was used already."
	deviceInvalidDE = "Dieser Code ist unbekannt, abgelaufen oder wurde bereits verwendet."
	deviceBlocked   = "Too many wrong codes from this browser."
	deviceApproved  = "Your device is signed in."
	deviceDenied    = "The device was not signed in."
)

// deviceTokens is the fake tokens service reading a typed user code as
// the tokens service does (lifecycle.NormalizeUserCode: any case, with or
// without the dash and spaces; anything else that cannot be a code is an
// invalid argument), so the pages can be tested with codes as people
// type them. authntest.Tokens itself only ignores the case.
type deviceTokens struct{ *authntest.Tokens }

func (d deviceTokens) GetDeviceAuthorization(ctx context.Context, r *tokensv1.GetDeviceAuthorizationRequest) (*tokensv1.GetDeviceAuthorizationResponse, error) {
	var b strings.Builder
	for _, c := range strings.ToUpper(r.GetUserCode()) {
		switch {
		case c == '-' || c == ' ':
		case strings.ContainsRune("BCDFGHJKLMNPQRSTVWXZ", c):
			b.WriteRune(c)
		default:
			return nil, connect.NewError(connect.CodeInvalidArgument, errors.New("not a user code"))
		}
	}
	code := b.String()
	if len(code) != 8 || len(r.GetUserCode()) > 32 {
		return nil, connect.NewError(connect.CodeInvalidArgument, errors.New("not a user code"))
	}
	return d.Tokens.GetDeviceAuthorization(ctx, &tokensv1.GetDeviceAuthorizationRequest{UserCode: code[:4] + "-" + code[4:]})
}

// newDeviceEnv is newEnv with deviceTokens in front of e.tok.
func newDeviceEnv(t *testing.T) *env {
	t.Helper()
	return newEnv(t, db.SQLite, func(o *service.HandlerOptions) {
		o.Tokens = deviceTokens{o.Tokens.(*authntest.Tokens)}
	})
}

// codePage opens /device, with the code of verification_uri_complete
// when prefill is not empty, and checks the form.
func (e *env) codePage(prefill string, header ...string) response {
	e.t.Helper()
	path := "/device"
	if prefill != "" {
		path += "?user_code=" + url.QueryEscape(prefill)
	}
	page := e.get(path, header...)
	if page.StatusCode != http.StatusOK || !hasCode(page.body, prefill) {
		e.t.Fatalf("GET %s: %d; want the code form with %q:\n%s", path, page.StatusCode, prefill, page.body)
	}
	return page
}

// enterCode opens /device and submits typed as the code.
func (e *env) enterCode(typed string, header ...string) response {
	e.t.Helper()
	return e.submit(e.codePage("", header...), url.Values{"userCode": {typed}}, header...)
}

// wantCodeForm checks that r is the code form again with status, the typed
// code kept, and msg (the field's error, or the form's with field "").
func wantCodeForm(t *testing.T, r response, status int, typed, field, msg string) {
	t.Helper()
	if r.StatusCode != status || r.Header.Get("Location") != "" {
		t.Fatalf("code %q: %d %q; want %d and the form again:\n%s", typed, r.StatusCode, r.Header.Get("Location"), status, r.body)
	}
	if !strings.Contains(r.body, `<form method="post" action="/device?ui_locales=`) ||
		!hasCode(r.body, typed) || !strings.Contains(r.body, `name="csrf"`) {
		t.Fatalf("code %q: the form with the typed code is missing:\n%s", typed, r.body)
	}
	if field != "" {
		if got := fieldError(t, r.body, field); !strings.HasPrefix(got, msg) {
			t.Fatalf("code %q: field error %q; want %q", typed, got, msg)
		}
	} else if !strings.Contains(r.body, msg) {
		t.Fatalf("code %q: want %q:\n%s", typed, msg, r.body)
	}
}

// hasCode reports whether body has the code field holding typed.
func hasCode(body, typed string) bool {
	field := `<input id="userCode" name="userCode" type="text"`
	if typed == "" {
		return strings.Contains(body, field+` autocomplete=`)
	}
	return strings.Contains(body, field+` value="`+template.HTMLEscapeString(typed)+`"`)
}

// TestDeviceCodePage: the code form (prefilled from
// verification_uri_complete, with a browser cookie), and its refusals: no
// cookie, a wrong CSRF token, codes that are malformed or unknown.
func TestDeviceCodePage(t *testing.T) {
	t.Parallel()
	e := newDeviceEnv(t)
	id := e.tok.AddDevice("BCDF-GHJK", "web", "openid")

	page := e.codePage("BCDF-GHJK")
	srv, _ := url.Parse(e.srv.URL)
	if len(page.Cookies()) == 0 || len(e.jar.Cookies(srv)) == 0 {
		t.Fatalf("GET /device set no browser cookie: %v", page.Header["Set-Cookie"])
	}
	if !strings.Contains(page.body, `<form method="post" action="/device?ui_locales=en"`) || strings.Contains(page.body, "<script") ||
		!strings.Contains(page.body, "Connect a device") || !strings.Contains(page.body, `autocomplete="one-time-code"`) {
		t.Errorf("code page:\n%s", page.body)
	}
	if de := e.codePage("", "Accept-Language", "de-DE"); !strings.Contains(de.body, `<html lang="de">`) || !strings.Contains(de.body, "Gerät verbinden") {
		t.Errorf("code page in German:\n%s", de.body)
	}
	// HTML in the query is escaped, not rendered.
	if r := e.get("/device?user_code=" + url.QueryEscape(`"><b>x`)); strings.Contains(r.body, "<b>x") {
		t.Errorf("user_code is not escaped:\n%s", r.body)
	}

	// Without the browser cookie (a new browser posting the form): 400.
	e.newBrowser()
	if r := e.post("/device", url.Values{"userCode": {"BCDF-GHJK"}, "csrf": {"x"}}); r.StatusCode != http.StatusBadRequest ||
		!strings.Contains(r.body, "did not send the login cookie") || r.Header.Get("Location") != "" {
		t.Fatalf("no cookie: %d %q\n%s", r.StatusCode, r.Header.Get("Location"), r.body)
	}
	// With the cookie and a forged CSRF token: 403.
	page = e.codePage("")
	if r := e.post("/device", url.Values{"userCode": {"BCDF-GHJK"}, "csrf": {"forged"}}); r.StatusCode != http.StatusForbidden ||
		!strings.Contains(r.body, "This form has expired") || r.Header.Get("Location") != "" {
		t.Fatalf("wrong csrf: %d %q\n%s", r.StatusCode, r.Header.Get("Location"), r.body)
	}
	if r := e.post("/device", url.Values{"userCode": {"BCDF-GHJK"}}); r.StatusCode != http.StatusForbidden {
		t.Fatalf("no csrf: %d\n%s", r.StatusCode, r.body)
	}

	// Malformed and unknown codes: the form again with the typed code and
	// device.invalid on the field (a new browser per batch of four, under
	// the limit of five wrong codes).
	for i, typed := range []string{"BCDF-GHJ", "AEIO-UAEI", "BCDF-GHJK-L", "bcdf_ghjk", "", "ZZZZ-ZZZZ", "zzzz zzzz", "<b>BCDF</b>"} {
		if i%4 == 0 {
			e.newBrowser()
			page = e.codePage("")
		}
		wantCodeForm(t, e.submit(page, url.Values{"userCode": {typed}}), http.StatusBadRequest, typed, "userCode", deviceInvalid)
	}
	e.newBrowser()
	de := e.enterCode("ZZZZ-ZZZZ", "Accept-Language", "de")
	wantCodeForm(t, de, http.StatusBadRequest, "ZZZZ-ZZZZ", "userCode", deviceInvalidDE)
	if e.tok.Decision(id) != nil {
		t.Fatal("a refused code page recorded a decision")
	}
}

// TestDeviceWrongCodesBlockTheBrowser: five wrong codes from a browser,
// then even the right code is refused with 429 until the window ends;
// another browser is not affected.
func TestDeviceWrongCodesBlockTheBrowser(t *testing.T) {
	t.Parallel()
	e := newDeviceEnv(t)
	e.tok.AddDevice("BCDF-GHJK", "web", "openid")

	page := e.codePage("")
	for i := range session.DeviceAttempts {
		typed := []string{"ZZZZ-ZZZZ", "BCDF-GHJ", "XXXX-XXXX", "bcdf-ghjx", "QQQQ-QQQQ"}[i]
		page = e.submit(page, url.Values{"userCode": {typed}})
		wantCodeForm(t, page, http.StatusBadRequest, typed, "userCode", deviceInvalid)
	}
	for range 2 {
		r := e.submit(e.codePage("BCDF-GHJK"), url.Values{"userCode": {"BCDF-GHJK"}})
		wantCodeForm(t, r, http.StatusTooManyRequests, "BCDF-GHJK", "", deviceBlocked)
	}
	if r := e.submit(e.codePage("", "Accept-Language", "de"), url.Values{"userCode": {"ZZZZ-ZZZZ"}}, "Accept-Language", "de"); r.StatusCode != http.StatusTooManyRequests ||
		!strings.Contains(r.body, "Zu viele falsche Codes aus diesem Browser") {
		t.Fatalf("blocked, in German: %d\n%s", r.StatusCode, r.body)
	}

	// Another browser (a new cookie jar) still gets through to the sign-in.
	blocked := e.jar
	e.newBrowser()
	if r := e.follow(e.enterCode("BCDF-GHJK")); !strings.Contains(r.body, `name="loginName"`) {
		t.Fatalf("another browser: %d\n%s", r.StatusCode, r.body)
	}

	// The first browser again once the window has passed.
	e.jar = blocked
	e.http.Jar = blocked
	e.advance(session.DeviceAttemptWindow)
	if r := e.follow(e.enterCode("bcdf ghjk")); !strings.Contains(r.body, `name="loginName"`) {
		t.Fatalf("the blocked browser after the window: %d\n%s", r.StatusCode, r.body)
	}
}

// TestDeviceApproveAndDeny: a code typed as people do, the sign-in, the
// consent page with the code and the app, Allow recording the session's
// login for the device; then, signed in, a second code straight to the
// consent page, and Deny.
func TestDeviceApproveAndDeny(t *testing.T) {
	t.Parallel()
	e := newDeviceEnv(t)
	approveID := e.tok.AddDevice("BCDF-GHJK", "web", "openid", "profile")
	denyID := e.tok.AddDevice("LMNP-QRST", "web", "openid")

	r := e.enterCode("bcdfghjk")
	if loc := r.Header.Get("Location"); r.StatusCode != http.StatusFound || !strings.HasPrefix(loc, "/ui/login/") {
		t.Fatalf("a valid code: %d %q; want the login pages\n%s", r.StatusCode, loc, r.body)
	}
	page := e.follow(r)
	if !strings.Contains(page.body, `name="loginName"`) {
		t.Fatalf("want the login name page: %d\n%s", page.StatusCode, page.body)
	}
	page = e.follow(e.submit(page, url.Values{"loginName": {"alice"}}))
	if !strings.Contains(page.body, `name="password"`) {
		t.Fatalf("want the password page: %d\n%s", page.StatusCode, page.body)
	}
	page = e.follow(e.submit(page, url.Values{"password": {"Alice-Pass-1"}}))
	if page.Request.URL.Path != "/ui/login/consent" {
		t.Fatalf("after the sign-in: %s %d; want the consent page\n%s", page.Request.URL.Path, page.StatusCode, page.body)
	}
	for _, want := range []string{"<title>Sign in on a device", "<h1>Sign in on a device</h1>", `<p class="usercode"><strong>BCDF-GHJK</strong></p>`,
		"Web App on a device asks to use your account alice@acme.example.", "It asks for:",
		`value="accept">Allow</button>`, `value="deny" class="secondary">Deny</button>`} {
		if !strings.Contains(page.body, want) {
			t.Fatalf("consent page: want %q:\n%s", want, page.body)
		}
	}
	if strings.Contains(page.body, "bcdfghjk") {
		t.Error("the consent page shows the code as typed, not as the device shows it")
	}
	if e.tok.Decision(approveID) != nil {
		t.Fatal("decided before the person allowed it")
	}
	consent := page
	r = e.submit(consent, url.Values{"decision": {"accept"}})
	if loc := r.Header.Get("Location"); (r.StatusCode != http.StatusFound && r.StatusCode != http.StatusSeeOther) ||
		!strings.HasPrefix(loc, "/device/done?result=approved") {
		t.Fatalf("after Allow: %d %q\n%s", r.StatusCode, loc, r.body)
	}
	d := e.tok.Decision(approveID)
	if d == nil || !d.GetApprove() || d.GetDeviceId() != approveID || d.GetUserId() != "alice-id" || d.GetOrgId() != "org1" ||
		d.GetSessionId() == "" || !slices.Contains(d.GetAmr(), "pwd") || !d.GetAuthTime().AsTime().Equal(e.clock()) {
		t.Fatalf("decision %v", d)
	}
	if done := e.follow(r); done.StatusCode != http.StatusOK || !strings.Contains(done.body, deviceApproved) || !strings.Contains(done.body, "Device connected") {
		t.Fatalf("done page: %d\n%s", done.StatusCode, done.body)
	}
	// The session recorded is the browser's: an authorization request of
	// the same browser without a page answers from it.
	code := e.tok.Code(e.code(e.authorize(codeParams("prompt", "none")).location(), "st-1"))
	if code.GetSessionId() != d.GetSessionId() {
		t.Errorf("device approved with session %q; the browser's is %q", d.GetSessionId(), code.GetSessionId())
	}
	// Allow sent again (a second click) decides nothing more.
	if r := e.submit(consent, url.Values{"decision": {"accept"}}); r.StatusCode != http.StatusNotFound || r.Header.Get("Location") != "" {
		t.Errorf("Allow again: %d %q; want the page of an unknown request", r.StatusCode, r.Header.Get("Location"))
	}
	if e.tok.Decision(approveID) != d {
		t.Error("Allow again changed the decision")
	}

	// Signed in: from the code straight to the consent page.
	r = e.enterCode("lmnp-qrst")
	if loc := r.Header.Get("Location"); !strings.HasPrefix(loc, "/ui/login/consent") {
		t.Fatalf("a signed-in browser: %d %q; want the consent page at once\n%s", r.StatusCode, loc, r.body)
	}
	page = e.follow(r)
	if !strings.Contains(page.body, "<strong>LMNP-QRST</strong>") || !strings.Contains(page.body, "Sign in on a device") {
		t.Fatalf("consent page for a signed-in browser: %d\n%s", page.StatusCode, page.body)
	}
	r = e.submit(page, url.Values{"decision": {"deny"}})
	if loc := r.Header.Get("Location"); (r.StatusCode != http.StatusFound && r.StatusCode != http.StatusSeeOther) ||
		!strings.HasPrefix(loc, "/device/done?result=denied") {
		t.Fatalf("after Deny: %d %q\n%s", r.StatusCode, loc, r.body)
	}
	if d := e.tok.Decision(denyID); d == nil || d.GetApprove() || d.GetUserId() != "" || d.GetSessionId() != "" {
		t.Fatalf("denial recorded as %v", d)
	}
	if done := e.follow(r); !strings.Contains(done.body, deviceDenied) || !strings.Contains(done.body, "Device not connected") {
		t.Fatalf("done page after Deny:\n%s", done.body)
	}

	// Decided codes are gone.
	for _, typed := range []string{"BCDF-GHJK", "LMNP-QRST"} {
		wantCodeForm(t, e.enterCode(typed), http.StatusBadRequest, typed, "userCode", deviceInvalid)
	}
}

// TestDeviceDonePageLanguage: the pages after Deny and after Allow speak
// the language of the pages before them (ui_locales on the code page,
// while the browser asks for English).
func TestDeviceDonePageLanguage(t *testing.T) {
	t.Parallel()
	e := newDeviceEnv(t)
	e.tok.AddDevice("BCDF-GHJK", "web", "openid")
	e.tok.AddDevice("LMNP-QRST", "web", "openid")
	en := []string{"Accept-Language", "en"}
	enter := func(code string) response {
		t.Helper()
		page := e.get("/device?ui_locales=de&user_code="+code, en...)
		if !strings.Contains(page.body, "Gerät verbinden") {
			t.Fatalf("code page with ui_locales=de:\n%s", page.body)
		}
		return e.follow(e.submit(page, url.Values{"userCode": {code}}, en...), en...)
	}
	page := enter("BCDF-GHJK")
	if !strings.Contains(page.body, "Loginname") {
		t.Fatalf("login page with ui_locales=de:\n%s", page.body)
	}
	page = e.follow(e.submit(page, url.Values{"loginName": {"alice"}}, en...), en...)
	page = e.follow(e.submit(page, url.Values{"password": {"Alice-Pass-1"}}, en...), en...)
	if !strings.Contains(page.body, "Auf einem Gerät anmelden") || !strings.Contains(page.body, `value="deny" class="secondary">Ablehnen</button>`) {
		t.Fatalf("consent page with ui_locales=de:\n%s", page.body)
	}
	if done := e.follow(e.submit(page, url.Values{"decision": {"deny"}}, en...), en...); !strings.Contains(done.body, "Das Gerät wurde nicht angemeldet") {
		t.Errorf("done page after Deny with ui_locales=de is not German:\n%s", done.body)
	}
	page = enter("LMNP-QRST")
	r := e.submit(page, url.Values{"decision": {"accept"}}, en...)
	if !strings.HasPrefix(r.Header.Get("Location"), "/device/done?result=approved&ui_locales=de") {
		t.Fatalf("after Allow: %d %q", r.StatusCode, r.Header.Get("Location"))
	}
	if done := e.follow(r, en...); !strings.Contains(done.body, "Ihr Gerät ist angemeldet") {
		t.Errorf("done page after Allow with ui_locales=de is not German (redirect %q):\n%s", r.Header.Get("Location"), done.body)
	}
}

// TestDeviceClientRefused: a code of a client that is not (or no longer)
// an active OIDC application ends on an error page, before any sign-in,
// and records no decision.
func TestDeviceClientRefused(t *testing.T) {
	t.Parallel()
	e := newDeviceEnv(t)
	codes := map[string]string{"off": "VWXZ-BCDF", "api": "XZBC-DFGH", "deleted": "GHJK-LMNP"}
	for _, client := range []string{"off", "api", "deleted"} {
		id := e.tok.AddDevice(codes[client], client, "openid")
		r := e.enterCode(codes[client])
		if r.StatusCode != http.StatusBadRequest || r.Header.Get("Location") != "" || !strings.Contains(r.body, "Something went wrong") ||
			strings.Contains(r.body, `name="loginName"`) || strings.Contains(r.body, `name="decision"`) {
			t.Fatalf("client %s: %d %q\n%s", client, r.StatusCode, r.Header.Get("Location"), r.body)
		}
		if e.tok.Decision(id) != nil {
			t.Fatalf("client %s: a decision was recorded", client)
		}
	}
	// The web app's code still works in the same browser.
	e.tok.AddDevice("BCDF-GHJK", "web", "openid")
	if r := e.follow(e.enterCode("BCDF-GHJK")); !strings.Contains(r.body, `name="loginName"`) {
		t.Fatalf("a good client after refused ones: %d\n%s", r.StatusCode, r.body)
	}
}
