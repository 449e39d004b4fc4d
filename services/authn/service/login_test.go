package service_test

import (
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gatehouse-id/gatehouse/pkg/db"
	directoryv1 "github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/directory/v1"
	"github.com/gatehouse-id/gatehouse/services/authn/internal/session"
)

// fieldError returns the error tied to an input through aria-describedby.
func fieldError(t *testing.T, body, id string) string {
	t.Helper()
	if !regexp.MustCompile(`id="` + id + `"[^>]*aria-invalid="true" aria-describedby="` + id + `-error"`).MatchString(body) {
		return ""
	}
	m := regexp.MustCompile(`<p class="error" id="` + id + `-error" role="alert">([^<]*)</p>`).FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("input %s is described by a missing error", id)
	}
	return m[1]
}

// passwordPage runs the authorize request and the login name step.
func (e *env) passwordPage(p url.Values, loginName string, header ...string) response {
	e.t.Helper()
	page := e.follow(e.authorize(p, header...), header...)
	return e.follow(e.submit(page, url.Values{"loginName": {loginName}}, header...), header...)
}

func TestPasswordMessagesDoNotRevealUsers(t *testing.T) {
	e := newEnv(t, db.SQLite)
	unknown := e.passwordPage(codeParams(), "nobody@acme.example")
	if !strings.Contains(unknown.body, `name="password"`) || !strings.Contains(unknown.body, "nobody@acme.example") {
		t.Fatalf("an unknown login name must still get the password page:\n%s", unknown.body)
	}
	r1 := e.submit(unknown, url.Values{"password": {"guess"}})
	e.newBrowser()
	r2 := e.submit(e.passwordPage(codeParams(), "alice"), url.Values{"password": {"guess"}})
	m1, m2 := fieldError(t, r1.body, "password"), fieldError(t, r2.body, "password")
	if r1.StatusCode != r2.StatusCode || m1 != m2 || m1 == "" {
		t.Errorf("unknown user: %d %q; known user, wrong password: %d %q; want the same non-empty answer", r1.StatusCode, m1, r2.StatusCode, m2)
	}
	r3 := e.submit(r2, url.Values{"password": {""}})
	if fieldError(t, r3.body, "password") == "" || r3.StatusCode != http.StatusBadRequest {
		t.Errorf("empty password: status %d; want 400 with a field error", r3.StatusCode)
	}
}

func TestLockoutAndClientAddress(t *testing.T) {
	e := newEnv(t, db.SQLite)
	page := e.passwordPage(codeParams(), "alice", "X-Real-Ip", "198.51.100.7")
	for range e.dir.MaxFailures {
		page = e.submit(page, url.Values{"password": {"wrong"}}, "X-Real-Ip", "198.51.100.7")
		if page.StatusCode != http.StatusUnauthorized {
			t.Fatalf("wrong password: status %d; want 401", page.StatusCode)
		}
	}
	// A lock reads exactly like a wrong password: it must not tell that
	// the name exists, nor that someone is guessing.
	wrong := fieldError(t, page.body, "password")
	locked := e.submit(page, url.Values{"password": {"Alice-Pass-1"}}, "X-Real-Ip", "198.51.100.7")
	if locked.StatusCode != http.StatusUnauthorized || fieldError(t, locked.body, "password") != wrong || wrong == "" {
		t.Errorf("locked account: status %d, message %q; want 401 and the wrong-password message %q", locked.StatusCode, fieldError(t, locked.body, "password"), wrong)
	}
	if strings.Contains(strings.ToLower(locked.body), "locked") || strings.Contains(locked.body, "attempts") {
		t.Errorf("locked account: the page mentions the lock:\n%s", locked.body)
	}
	for _, a := range e.dir.Addresses {
		if a != "198.51.100.7" {
			t.Errorf("VerifyPassword client_address %q; want X-Real-Ip 198.51.100.7", a)
		}
	}
}

func TestDeactivatedUser(t *testing.T) {
	e := newEnv(t, db.SQLite)
	e.dir.SetState("bob-id", directoryv1.UserState_USER_STATE_INACTIVE)
	page := e.passwordPage(codeParams(), "bob")
	wrong := e.submit(page, url.Values{"password": {"nope"}})
	if wrong.StatusCode != http.StatusUnauthorized || strings.Contains(wrong.body, "deactivated") {
		t.Errorf("wrong password of a deactivated user: status %d; want the plain wrong-password answer", wrong.StatusCode)
	}
	right := e.submit(wrong, url.Values{"password": {"Bob-Pass-2"}})
	if right.StatusCode != http.StatusForbidden || !strings.Contains(fieldError(t, right.body, "password"), "deactivated") {
		t.Errorf("correct password of a deactivated user: status %d, %q; want 403 and a clear message", right.StatusCode, fieldError(t, right.body, "password"))
	}
}

func TestUserOfAnotherOrgIsRefused(t *testing.T) {
	e := newEnv(t, db.SQLite)
	// carol is in org2; the web app's project is owned by org1.
	r := e.submit(e.passwordPage(codeParams(), "carol"), url.Values{"password": {"Carol-Pass-3"}})
	if r.StatusCode != http.StatusUnauthorized {
		t.Errorf("status %d; want 401 (no such user in org1)", r.StatusCode)
	}
	// An ordinary app cannot select another organization by the reserved
	// scope: its users never sign in to it (the cross-tenant takeover).
	if loc := e.authorize(codeParams("scope", "openid urn:gatehouse:iam:org:id:org2")).Header.Get("Location"); !strings.Contains(loc, "error=invalid_scope") {
		t.Errorf("org scope of a foreign org: redirect %q; want invalid_scope", loc)
	}
	// Once the app's project is granted to org2, the scope selects org2,
	// where carol signs in: she consents first, once per scope set.
	e.dir.Clients["web"].GrantedOrgIds = []string{"org2"}
	org2 := codeParams("scope", "openid urn:gatehouse:iam:org:id:org2")
	page := e.follow(e.authorize(org2))
	page = e.follow(e.submit(page, url.Values{"loginName": {"carol"}}))
	consent := e.follow(e.submit(page, url.Values{"password": {"Carol-Pass-3"}}))
	if consent.Request.URL.Path != "/ui/login/consent" || !strings.Contains(consent.body, "Web App") {
		t.Fatalf("carol of a granted org: at %s (%d %s); want the consent page naming the app:\n%s", consent.Request.URL.Path, consent.StatusCode, consent.Header.Get("Location"), consent.body)
	}
	// Without consent, prompt=none answers consent_required.
	if loc := e.authorize(codeParams("scope", "openid urn:gatehouse:iam:org:id:org2", "prompt", "none")).Header.Get("Location"); !strings.Contains(loc, "error=consent_required") {
		t.Errorf("prompt=none before consent: %q; want consent_required", loc)
	}
	u := e.submit(consent, url.Values{"decision": {"accept"}}).location()
	if c := e.tok.Code(e.code(u, "st-1")); c.GetUserId() != "carol-id" || c.GetOrgId() != "org2" {
		t.Errorf("code for %s in %s; want carol in org2", c.GetUserId(), c.GetOrgId())
	}
	// Remembered: the next request (and a silent one) needs no page.
	if loc := e.authorize(codeParams("scope", "openid urn:gatehouse:iam:org:id:org2", "prompt", "none")).Header.Get("Location"); !strings.Contains(loc, "code=") {
		t.Errorf("prompt=none after consent: %q; want a code", loc)
	}
	// A wider scope set asks again; declining is access_denied.
	wider := codeParams("scope", "openid profile urn:gatehouse:iam:org:id:org2")
	again := e.follow(e.authorize(wider))
	if again.Request.URL.Path != "/ui/login/consent" {
		t.Fatalf("wider scopes: at %s; want the consent page", again.Request.URL.Path)
	}
	if loc := e.submit(again, url.Values{"decision": {"deny"}}).Header.Get("Location"); !strings.Contains(loc, "error=access_denied") {
		t.Errorf("declined: %q; want access_denied", loc)
	}
	// prompt=consent asks even after consent.
	if forced := e.follow(e.authorize(codeParams("scope", "openid urn:gatehouse:iam:org:id:org2", "prompt", "consent"))); forced.Request.URL.Path != "/ui/login/consent" {
		t.Errorf("prompt=consent: at %s; want the consent page", forced.Request.URL.Path)
	}
}

func TestCSRFAndCookieChecks(t *testing.T) {
	e := newEnv(t, db.SQLite)
	page := e.follow(e.authorize(codeParams()))
	forged := e.submit(page, url.Values{"loginName": {"alice"}, "csrf": {"forged"}})
	if forged.StatusCode != http.StatusForbidden || forged.Header.Get("Location") != "" {
		t.Errorf("forged CSRF token: status %d; want 403", forged.StatusCode)
	}
	missing := e.submit(page, url.Values{"loginName": {"alice"}, "csrf": {""}})
	if missing.StatusCode != http.StatusForbidden {
		t.Errorf("missing CSRF token: status %d; want 403", missing.StatusCode)
	}
	// Another browser cannot use this request, even with its token.
	e.newBrowser()
	other := e.submit(page, url.Values{"loginName": {"alice"}})
	if other.StatusCode != http.StatusBadRequest {
		t.Errorf("no cookie: status %d; want 400", other.StatusCode)
	}
	e.follow(e.authorize(codeParams())) // this browser gets a cookie and its own token
	foreign := e.get(actionRE.FindStringSubmatch(page.body)[1] + "?authRequestID=" + url.QueryEscape(hiddenRE.FindStringSubmatch(page.body)[2]))
	if foreign.StatusCode != http.StatusNotFound {
		t.Errorf("another browser's request: status %d; want 404", foreign.StatusCode)
	}
}

func TestForcedPasswordChange(t *testing.T) {
	e := newEnv(t, db.SQLite)
	e.dir.Users["alice-id"].ChangeRequired = true
	r := e.submit(e.passwordPage(codeParams(), "alice"), url.Values{"password": {"Alice-Pass-1"}})
	if r.StatusCode != http.StatusSeeOther || !strings.HasPrefix(r.Header.Get("Location"), "/ui/login/password/change?") {
		t.Fatalf("status %d Location %q; want the change page", r.StatusCode, r.Header.Get("Location"))
	}
	page := e.follow(r)
	if !strings.Contains(page.body, "at least 8 characters") || !strings.Contains(page.body, `aria-describedby="policy"`) {
		t.Errorf("change page lacks the policy:\n%s", page.body)
	}
	rows := []struct {
		current, next, confirm, field string
	}{
		{"Alice-Pass-1", "Newpass-9", "Newpass-8", "confirmPassword"},
		{"Alice-Pass-1", "short1A", "short1A", "newPassword"},
		{"Alice-Pass-1", "nouppercase9", "nouppercase9", "newPassword"},
		{"wrong", "Newpass-9", "Newpass-9", "currentPassword"},
		{"Alice-Pass-1", "Alice-Pass-1", "Alice-Pass-1", "newPassword"}, // refused by the directory
	}
	for _, row := range rows {
		page = e.submit(page, url.Values{"currentPassword": {row.current}, "newPassword": {row.next}, "confirmPassword": {row.confirm}})
		if page.StatusCode < 400 || fieldError(t, page.body, row.field) == "" {
			t.Errorf("%+v: status %d; want an error on %s", row, page.StatusCode, row.field)
		}
	}
	r = e.submit(page, url.Values{"currentPassword": {"Alice-Pass-1"}, "newPassword": {"Newpass-9"}, "confirmPassword": {"Newpass-9"}})
	if r.StatusCode != http.StatusFound {
		t.Fatalf("status %d:\n%s", r.StatusCode, r.body)
	}
	if c := e.tok.Code(e.code(r.location(), "st-1")); c.GetUserId() != "alice-id" {
		t.Errorf("code for %s; want alice", c.GetUserId())
	}
	if e.dir.Users["alice-id"].Password != "Newpass-9" || e.dir.Users["alice-id"].ChangeRequired {
		t.Error("the directory did not get the new password")
	}
}

func TestLanguages(t *testing.T) {
	e := newEnv(t, db.SQLite)
	rows := []struct {
		locales, accept, lang, text string
	}{
		{"", "", "en", "Sign in"},
		{"de", "", "de", "Anmelden"},
		{"fr-CA de-AT", "en", "de", "Anmelden"},
		{"fr", "de-DE,de;q=0.9,en;q=0.8", "de", "Anmelden"},
		{"", "en;q=0.5, de;q=0.9", "de", "Loginname"},
		{"en", "de", "en", "Login name"},
	}
	for _, row := range rows {
		page := e.follow(e.authorize(codeParams("ui_locales", row.locales), "Accept-Language", row.accept), "Accept-Language", row.accept)
		if !strings.Contains(page.body, `<html lang="`+row.lang+`">`) || !strings.Contains(page.body, row.text) {
			t.Errorf("ui_locales %q Accept-Language %q: want lang %s with %q:\n%s", row.locales, row.accept, row.lang, row.text, page.body)
		}
	}
	r := e.get("/oauth/v2/authorize?client_id=nope&ui_locales=de")
	if !strings.Contains(r.body, `<html lang="de">`) || !strings.Contains(r.body, "Etwas ist schiefgelaufen") {
		t.Errorf("error page not in German:\n%s", r.body)
	}
}

func TestPromptLoginAndMaxAge(t *testing.T) {
	e := newEnv(t, db.SQLite)
	first := e.tok.Code(e.code(e.login(codeParams(), "alice", "Alice-Pass-1"), "st-1"))
	e.advance(2 * time.Minute)

	// prompt=login asks for the password again, in the same session.
	u := e.login(codeParams("prompt", "login"), "alice", "Alice-Pass-1")
	again := e.tok.Code(e.code(u, "st-1"))
	if again.GetSessionId() != first.GetSessionId() || !again.GetAuthTime().AsTime().Equal(e.clock()) {
		t.Errorf("prompt=login: session %s auth_time %v; want %s re-authenticated now", again.GetSessionId(), again.GetAuthTime().AsTime(), first.GetSessionId())
	}

	e.advance(2 * time.Minute)
	wantError(t, e.authorize(codeParams("prompt", "none", "max_age", "60")), webRedirect, "login_required", "st-1", false)
	e.code(e.authorize(codeParams("prompt", "none", "max_age", "600")).location(), "st-1")

	// max_age exceeded: the password page of the session's user.
	r := e.authorize(codeParams("max_age", "60"))
	if !strings.HasPrefix(r.Header.Get("Location"), "/ui/login/password?") {
		t.Fatalf("Location %q; want the password page", r.Header.Get("Location"))
	}
	page := e.follow(r)
	if !strings.Contains(page.body, "alice@acme.example") {
		t.Errorf("password page does not name the user:\n%s", page.body)
	}
	c := e.tok.Code(e.code(e.password(page, "Alice-Pass-1"), "st-1"))
	if !c.GetAuthTime().AsTime().Equal(e.clock()) {
		t.Errorf("auth_time %v; want now %v", c.GetAuthTime().AsTime(), e.clock())
	}
	// max_age=0 always re-authenticates.
	if r := e.authorize(codeParams("max_age", "0")); !strings.HasPrefix(r.Header.Get("Location"), "/ui/login/password?") {
		t.Errorf("max_age=0: Location %q; want the password page", r.Header.Get("Location"))
	}
}

func TestSelectAccountHintsAndPromptNone(t *testing.T) {
	e := newEnv(t, db.SQLite)
	alice := e.tok.Code(e.code(e.login(codeParams(), "alice", "Alice-Pass-1"), "st-1"))

	// prompt=select_account lists alice and offers another user.
	page := e.follow(e.authorize(codeParams("prompt", "select_account")))
	if !strings.Contains(page.body, "alice@acme.example") || !strings.Contains(page.body, "other=1") {
		t.Fatalf("select page:\n%s", page.body)
	}
	other := e.follow(e.get(regexp.MustCompile(`href="(/ui/login/login\?[^"]+)"`).FindStringSubmatch(page.body)[1]))
	other = e.follow(e.submit(other, url.Values{"loginName": {"bob"}}))
	bob := e.tok.Code(e.code(e.password(other, "Bob-Pass-2"), "st-1"))
	if bob.GetUserId() != "bob-id" || bob.GetSessionId() == alice.GetSessionId() {
		t.Fatalf("second user: %v", bob)
	}

	// Two sessions: no prompt shows the choice, prompt=none cannot choose.
	wantError(t, e.authorize(codeParams("prompt", "none")), webRedirect, "interaction_required", "st-1", false)
	page = e.follow(e.authorize(codeParams()))
	if !strings.Contains(page.body, "alice@acme.example") || !strings.Contains(page.body, "bob@acme.example") {
		t.Fatalf("select page lacks a session:\n%s", page.body)
	}
	r := e.submit(page, url.Values{"sessionID": {alice.GetSessionId()}})
	if c := e.tok.Code(e.code(r.location(), "st-1")); c.GetUserId() != "alice-id" || c.GetSessionId() != alice.GetSessionId() {
		t.Errorf("chose alice; got %v", c)
	}
	// A session id of no session of this browser is refused.
	page = e.follow(e.authorize(codeParams()))
	if r := e.submit(page, url.Values{"sessionID": {"forged"}}); r.StatusCode != http.StatusBadRequest {
		t.Errorf("forged session: status %d; want 400", r.StatusCode)
	}

	// login_hint and id_token_hint pick the session silently.
	r = e.authorize(codeParams("prompt", "none", "login_hint", "bob@acme.example"))
	if c := e.tok.Code(e.code(r.location(), "st-1")); c.GetUserId() != "bob-id" {
		t.Errorf("login_hint bob: code for %s", c.GetUserId())
	}
	e.tok.AddHint("alice-token", "alice-id", "web", alice.GetSessionId(), false)
	r = e.authorize(codeParams("prompt", "none", "id_token_hint", "alice-token"))
	if c := e.tok.Code(e.code(r.location(), "st-1")); c.GetUserId() != "alice-id" {
		t.Errorf("id_token_hint alice: code for %s", c.GetUserId())
	}
	// A hint for a user without a session here: login_required.
	e.tok.AddHint("carol-token", "carol-id", "web", "elsewhere", false)
	wantError(t, e.authorize(codeParams("prompt", "none", "id_token_hint", "carol-token")), webRedirect, "login_required", "st-1", false)
	// login_hint pre-fills the login name page.
	e.newBrowser()
	page = e.follow(e.authorize(codeParams("login_hint", "bob@acme.example")))
	if !strings.Contains(page.body, `value="bob@acme.example"`) {
		t.Errorf("login_hint not pre-filled:\n%s", page.body)
	}
}

func TestRegistration(t *testing.T) {
	e := newEnv(t, db.SQLite)
	r := e.authorize(codeParams("prompt", "create"))
	if !strings.HasPrefix(r.Header.Get("Location"), "/ui/login/register?") {
		t.Fatalf("prompt=create: Location %q; want the registration page", r.Header.Get("Location"))
	}
	page := e.follow(r)
	for _, want := range []string{`<label for="userName">`, "at least 8 characters", "an upper-case letter", "a digit"} {
		if !strings.Contains(page.body, want) {
			t.Errorf("registration page lacks %q", want)
		}
	}
	rows := []struct {
		fields url.Values
		field  string
		status int
	}{
		{url.Values{"userName": {""}, "password": {"Dave-Pass-4"}, "confirmPassword": {"Dave-Pass-4"}}, "userName", 400},
		{url.Values{"userName": {"dave"}, "password": {"weak"}, "confirmPassword": {"weak"}}, "password", 400},
		{url.Values{"userName": {"dave"}, "password": {"Dave-Pass-4"}, "confirmPassword": {"Dave-Pass-5"}}, "confirmPassword", 400},
		{url.Values{"userName": {"alice"}, "password": {"Dave-Pass-4"}, "confirmPassword": {"Dave-Pass-4"}}, "userName", 409},
	}
	for _, row := range rows {
		page = e.submit(page, row.fields)
		if page.StatusCode != row.status || fieldError(t, page.body, row.field) == "" {
			t.Errorf("%v: status %d; want %d and an error on %s", row.fields, page.StatusCode, row.status, row.field)
		}
	}
	r = e.submit(page, url.Values{"userName": {"dave"}, "firstName": {"Dave"}, "email": {"dave@acme.example"},
		"password": {"Dave-Pass-4"}, "confirmPassword": {"Dave-Pass-4"}})
	c := e.tok.Code(e.code(r.location(), "st-1"))
	if c.GetUserId() != "u-dave" || c.GetOrgId() != "org1" {
		t.Errorf("code for %s in %s; want the new user in org1", c.GetUserId(), c.GetOrgId())
	}
	if u := e.dir.Users["u-dave"]; u == nil || u.User.GetEmail() != "dave@acme.example" {
		t.Errorf("directory user %v", u)
	}
	// The new user is signed in.
	e.code(e.authorize(codeParams("prompt", "none")).location(), "st-1")
}

func TestRequestCompletesOnce(t *testing.T) {
	e := newEnv(t, db.SQLite)
	page := e.passwordPage(codeParams(), "alice")
	e.password(page, "Alice-Pass-1")
	r := e.submit(page, url.Values{"password": {"Alice-Pass-1"}})
	// The sign-in gave the browser a new identity, so the replayed form's
	// CSRF token is refused (403) before the spent request (404) is seen.
	if (r.StatusCode != http.StatusNotFound && r.StatusCode != http.StatusForbidden) || r.Header.Get("Location") != "" {
		t.Errorf("replayed login form: status %d Location %q; want 403 or 404 and no second code", r.StatusCode, r.Header.Get("Location"))
	}
	if len(e.tok.Codes) != 1 {
		t.Errorf("%d codes; want 1", len(e.tok.Codes))
	}
	// An expired request is gone too.
	e.newBrowser()
	page = e.passwordPage(codeParams(), "alice")
	e.advance(31 * time.Minute)
	if r := e.submit(page, url.Values{"password": {"Alice-Pass-1"}}); r.StatusCode != http.StatusNotFound {
		t.Errorf("expired request: status %d; want 404", r.StatusCode)
	}
}

func TestDependencyOutages(t *testing.T) {
	e := newEnv(t, db.SQLite)
	page := e.passwordPage(codeParams(), "alice")
	e.dir.Down = true
	r := e.submit(page, url.Values{"password": {"Alice-Pass-1"}})
	e.dir.Down = false
	if r.StatusCode != http.StatusServiceUnavailable || r.Header.Get("Retry-After") == "" {
		t.Errorf("directory down: status %d Retry-After %q; want 503 with a retry hint", r.StatusCode, r.Header.Get("Retry-After"))
	}
	// The request survives the outage.
	e.tok.Down = true
	r = e.submit(page, url.Values{"password": {"Alice-Pass-1"}})
	e.tok.Down = false
	wantError(t, r, webRedirect, "temporarily_unavailable", "st-1", false)
	if len(e.tok.Codes) != 0 {
		t.Errorf("%d codes created while tokens was down", len(e.tok.Codes))
	}
}

func TestLanguageKeptThroughTheFlow(t *testing.T) {
	e := newEnv(t, db.SQLite)
	page := e.passwordPage(codeParams("ui_locales", "de"), "alice")
	r := e.submit(page, url.Values{"password": {"wrong"}})
	if !strings.Contains(r.body, `<html lang="de">`) || fieldError(t, r.body, "password") != "Der Loginname oder das Passwort ist falsch." {
		t.Errorf("password page after a POST is not German:\n%s", r.body)
	}
}

// The organization's login policy: registration (off by default in the
// directory), password sign-in and whether unknown login names are
// revealed.
func TestLoginPolicy(t *testing.T) {
	e := newEnv(t, db.SQLite)
	pol := e.dir.Orgs["org1"].LoginPolicy

	// Registration not allowed: prompt=create shows the login page, the
	// login page has no registration link, and a posted form is refused.
	page := e.follow(e.authorize(codeParams("prompt", "create")))
	pol.AllowRegister = false
	regForm := page
	page = e.follow(e.authorize(codeParams("prompt", "create")))
	if page.Request.URL.Path != "/ui/login/login" || strings.Contains(page.body, "/ui/login/register") {
		t.Errorf("prompt=create without registration: at %s (link shown: %v); want the login page without the link",
			page.Request.URL.Path, strings.Contains(page.body, "/ui/login/register"))
	}
	r := e.submit(regForm, url.Values{"userName": {"eve"}, "password": {"Eve-Pass-44"}, "confirmPassword": {"Eve-Pass-44"}})
	if r.StatusCode != http.StatusForbidden || e.dir.Users["u-eve"] != nil {
		t.Errorf("registration posted while not allowed: status %d; want 403 and no user", r.StatusCode)
	}

	// Unknown login names: hidden by default, revealed when the policy says.
	page = e.follow(e.authorize(codeParams()))
	if r := e.submit(page, url.Values{"loginName": {"nobody"}}); r.StatusCode != http.StatusSeeOther || !strings.Contains(r.Header.Get("Location"), "/ui/login/password") {
		t.Errorf("unknown name, ignored: status %d Location %q; want the password page", r.StatusCode, r.Header.Get("Location"))
	}
	pol.IgnoreUnknownUsernames = false
	page = e.follow(e.authorize(codeParams()))
	if r := e.submit(page, url.Values{"loginName": {"nobody"}}); r.StatusCode != http.StatusUnauthorized || fieldError(t, r.body, "loginName") == "" {
		t.Errorf("unknown name, revealed: status %d; want 401 with the error on the login name", r.StatusCode)
	}

	// No password sign-in: the login name page says so and shows no form,
	// and a login name posted anyway goes no further.
	named := page
	pol.AllowUsernamePassword = false
	page = e.follow(e.authorize(codeParams()))
	if strings.Contains(page.body, `action="/ui/login/login"`) || !strings.Contains(page.body, "not allowed") {
		t.Errorf("password sign-in not allowed: the page shows the form or no reason:\n%s", page.body)
	}
	if r := e.submit(named, url.Values{"loginName": {"alice"}}); r.StatusCode != http.StatusForbidden || r.Header.Get("Location") != "" {
		t.Errorf("password sign-in not allowed: status %d Location %q; want 403", r.StatusCode, r.Header.Get("Location"))
	}
}

// TestSignInRotatesTheBrowserCookie: every successful authentication gives
// the browser a new cookie; one planted before it (session fixation)
// signs nobody in afterwards.
func TestSignInRotatesTheBrowserCookie(t *testing.T) {
	e := newEnv(t, db.SQLite)
	u, _ := url.Parse(e.srv.URL)
	cookie := func() string {
		for _, c := range e.jar.Cookies(u) {
			if c.Name == session.CookieName {
				return c.Value
			}
		}
		return ""
	}
	page := e.passwordPage(codeParams(), "alice")
	planted := cookie()
	e.code(e.password(page, "Alice-Pass-1"), "st-1")
	if now := cookie(); planted == "" || now == "" || now == planted {
		t.Fatalf("cookie before %q, after %q; want a new one after the sign-in", planted, now)
	}
	// The new cookie is signed in; the planted one is not.
	e.code(e.authorize(codeParams("prompt", "none")).location(), "st-1")
	e.jar.SetCookies(u, []*http.Cookie{{Name: session.CookieName, Value: planted, Path: "/"}})
	if loc := e.authorize(codeParams("prompt", "none")).Header.Get("Location"); !strings.Contains(loc, "error=login_required") {
		t.Fatalf("prompt=none with the pre-sign-in cookie: %q; want login_required", loc)
	}
}
