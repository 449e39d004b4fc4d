package e2e

import (
	"database/sql"
	"net/http"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"
)

var (
	verifyLinkRE = regexp.MustCompile(`https?://\S+/ui/login/mail/verification\?\S+`)
	initLinkRE   = regexp.MustCompile(`https?://\S+/ui/login/user/init\?\S+`)
)

// emailToken signs user in with the email scope.
func (e *afEnv) emailToken(user, password, state string) *oauth2.Token {
	e.t.Helper()
	cfg := e.web
	cfg.Scopes = []string{"openid", "email"}
	c := browser(e.t, e.base)
	p := e.password(c, afGet(e.t, c, cfg.AuthCodeURL(state, oidc.Nonce("n-"+state))), user, password)
	if p.loc == nil || p.loc.Query().Get("code") == "" {
		e.t.Fatalf("sign-in of %s: %d %v:\n%s", user, p.status, p.loc, p.body)
	}
	tok, err := cfg.Exchange(e.ctx, p.loc.Query().Get("code"))
	if err != nil {
		e.t.Fatal(err)
	}
	return tok
}

// emailClaims signs user in with the email scope and returns what
// userinfo says of the address.
func (e *afEnv) emailClaims(user, password, state string) (string, bool) {
	e.t.Helper()
	return e.userinfoEmail(e.emailToken(user, password, state))
}

func (e *afEnv) userinfoEmail(tok *oauth2.Token) (string, bool) {
	e.t.Helper()
	ui, err := e.provider.UserInfo(e.ctx, oauth2.StaticTokenSource(tok))
	if err != nil {
		e.t.Fatal(err)
	}
	return ui.Email, ui.EmailVerified
}

// waitEmail waits until userinfo reports addr and verified for tok: the
// tokens service follows the directory's changes within about a second.
func (e *afEnv) waitEmail(tok *oauth2.Token, addr string, verified bool) {
	e.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got, ok := e.userinfoEmail(tok)
		if got == addr && ok == verified {
			return
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("userinfo email %s verified %v after 10 s; want %s verified %v", got, ok, addr, verified)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// link finds the one link re matches in the newest message to address.
func (m *mailpit) link(address string, n int, re *regexp.Regexp) string {
	m.t.Helper()
	msgs := m.waitFor(address, n)
	text := m.text(msgs[0].ID)
	l := re.FindString(text)
	if l == "" {
		m.t.Fatalf("no link in the message to %s:\n%s", address, text)
	}
	return l
}

// orgName is the name of the admin's organization.
func (e *afEnv) orgName() string {
	e.t.Helper()
	org, _ := e.must("GET", "/management/v1/orgs/me", e.admin, "", nil)["org"].(map[string]any)
	return org["name"].(string)
}

// dirDB opens the embedded directory's database.
func (e *afEnv) dirDB(t *testing.T) *sql.DB {
	t.Helper()
	d, err := sql.Open("sqlite", "file:"+filepath.Join(e.dataDir, "directory.db")+"?_pragma=busy_timeout(5000)&_time_format=sqlite")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

// ageMail moves the queued messages a throttle's length into the past, as
// if the minute between two messages of a kind had passed.
func ageMail(t *testing.T, e *afEnv) {
	t.Helper()
	if _, err := e.dirDB(t).Exec(`UPDATE mail_outbox SET created_at = ?`, time.Now().Add(-2*time.Minute).UTC().Truncate(time.Microsecond)); err != nil {
		t.Fatal(err)
	}
}

// An address changed by an admin is unverified until the link mailed to it
// is followed and confirmed (a GET alone changes nothing); the old address
// hears of the change; the claim follows.
func TestEmailVerificationByMail(t *testing.T) {
	mp := startMailpit(t)
	e := afStartEnv(t, mp.env())
	id := e.user("vera", afPassword, false)
	tok := e.emailToken("vera", afPassword, "v1")
	if addr, ok := e.userinfoEmail(tok); addr != "vera@example.com" || !ok {
		t.Fatalf("before: %s %v; want vera@example.com verified (by an IAM owner)", addr, ok)
	}
	e.must("PUT", "/management/v1/users/"+id+"/email", e.admin, "", map[string]any{"email": "vera.new@example.com"})
	e.waitEmail(tok, "vera.new@example.com", false)
	notice := mp.waitFor("vera@example.com", 1)
	if notice[0].Subject != "Your e-mail address was changed" || !strings.Contains(mp.text(notice[0].ID), "vera.new@example.com") {
		t.Fatalf("the notice to the old address: %+v", notice[0])
	}
	link := mp.link("vera.new@example.com", 1, verifyLinkRE)
	if !strings.HasPrefix(link, e.base+"/ui/login/mail/verification?") {
		t.Fatalf("link %s not under the issuer", link)
	}
	b := browser(t, e.base)
	page := afGet(t, b, link)
	if page.status != http.StatusOK || !strings.Contains(page.body, "vera.new@example.com") {
		t.Fatalf("the link's page: %d:\n%s", page.status, page.body)
	}
	var verified int
	if err := e.dirDB(t).QueryRow(`SELECT COUNT(*) FROM users WHERE id = ? AND email_verified`, id).Scan(&verified); err != nil || verified != 0 {
		t.Fatalf("opening the link verified the address without the confirmation: %d, %v", verified, err)
	}
	done := afSubmit(t, b, e.base, page, url.Values{})
	if done.status != http.StatusOK || !strings.Contains(done.body, "Your e-mail address is verified") {
		t.Fatalf("after confirming: %d:\n%s", done.status, done.body)
	}
	e.waitEmail(tok, "vera.new@example.com", true)
	if again := afGet(t, browser(t, e.base), link); again.status != http.StatusBadRequest {
		t.Fatalf("the link a second time: %d", again.status)
	}
}

// An invitation: a user added without a password gets a mail whose link
// sets the first password and verifies the address in one step; a resend
// replaces the link.
func TestInvitationByMail(t *testing.T) {
	mp := startMailpit(t)
	e := afStartEnv(t, mp.env())
	u := e.must("POST", "/management/v1/users/human", e.admin, "", map[string]any{"userName": "ines",
		"profile": map[string]any{"firstName": "Ines", "lastName": "Invited", "preferredLanguage": "de"},
		"email":   map[string]any{"email": "ines@example.com"}})
	id := u["userId"].(string)
	first := mp.link("ines@example.com", 1, initLinkRE)
	if msgs := mp.messages("ines@example.com"); msgs[0].Subject != "Ihr Konto bei "+e.orgName() {
		t.Fatalf("subject %q; want the German invitation", msgs[0].Subject)
	}
	// A second invitation (once a minute) replaces the first link.
	ageMail(t, e)
	e.must("POST", "/management/v1/users/"+id+"/_resend_initialization", e.admin, "", map[string]any{})
	second := mp.link("ines@example.com", 2, initLinkRE)
	if second == first {
		t.Fatal("the resend mailed the same link")
	}
	if p := afGet(t, browser(t, e.base), first); p.status != http.StatusBadRequest {
		t.Fatalf("the replaced link: %d", p.status)
	}
	b := browser(t, e.base)
	page := afGet(t, b, second)
	if page.status != http.StatusOK || !strings.Contains(page.body, `name="newPassword"`) || !strings.Contains(page.body, `lang="de"`) {
		t.Fatalf("the invitation page: %d:\n%s", page.status, page.body)
	}
	const pw = "Ines-Passw0rd!"
	done := afSubmit(t, b, e.base, page, url.Values{"newPassword": {pw}, "confirmPassword": {pw}})
	if done.status != http.StatusOK || !strings.Contains(done.body, "Passwort ist gesetzt") {
		t.Fatalf("after the password: %d:\n%s", done.status, done.body)
	}
	if addr, ok := e.emailClaims("ines", pw, "i1"); addr != "ines@example.com" || !ok {
		t.Fatalf("after the invitation: %s %v; want verified", addr, ok)
	}
	if p := afGet(t, browser(t, e.base), second); p.status != http.StatusBadRequest {
		t.Fatalf("the used link: %d", p.status)
	}
}

var codeRE = regexp.MustCompile(`(?m)^\s*([A-Z2-7]{26})\s*$`)

// Registration under a login policy that requires a verified address: the
// new user gets the code by mail and no authorization code until it
// enters it; then the relying party sees a verified address.
func TestRegistrationVerifiesEmail(t *testing.T) {
	mp := startMailpit(t)
	e := afStartEnv(t, mp.env())
	e.loginPolicy(map[string]any{"allowRegister": true, "ignoreUnknownUsernames": true, "requireVerifiedEmail": true})
	cfg := e.web
	cfg.Scopes = []string{"openid", "email"}
	c := browser(t, e.base)
	p := afGet(t, c, cfg.AuthCodeURL("rg", oidc.Nonce("n-rg"), oauth2.SetAuthURLParam("prompt", "create")))
	if !afIs(p, "userName") {
		t.Fatalf("want the registration form; got %d:\n%s", p.status, p.body)
	}
	const pw = "Rena-Passw0rd!"
	step := afSubmit(t, c, e.base, p, url.Values{"userName": {"rena"}, "firstName": {"Rena"}, "lastName": {"New"},
		"email": {"rena@example.com"}, "password": {pw}, "confirmPassword": {pw}})
	if step.loc != nil || !afIs(step, "code") {
		t.Fatalf("after registering: want the code step; got %d %v:\n%s", step.status, step.loc, step.body)
	}
	msgs := mp.waitFor("rena@example.com", 1)
	m := codeRE.FindStringSubmatch(mp.text(msgs[0].ID))
	if m == nil {
		t.Fatalf("no code in:\n%s", mp.text(msgs[0].ID))
	}
	if wrong := afSubmit(t, c, e.base, step, url.Values{"code": {"AAAAAAAAAAAAAAAAAAAAAAAAAA"}}); wrong.status != http.StatusBadRequest {
		t.Fatalf("a wrong code: %d", wrong.status)
	}
	done := afSubmit(t, c, e.base, step, url.Values{"code": {m[1]}})
	if done.loc == nil || done.loc.Query().Get("code") == "" {
		t.Fatalf("after the code: %d %v:\n%s", done.status, done.loc, done.body)
	}
	tok, err := cfg.Exchange(e.ctx, done.loc.Query().Get("code"))
	if err != nil {
		t.Fatal(err)
	}
	if addr, ok := e.userinfoEmail(tok); addr != "rena@example.com" || !ok {
		t.Fatalf("userinfo: %s %v; want rena@example.com verified", addr, ok)
	}
}

// A linked identity's provider asserting email_verified for the user's
// exact address verifies it at the next sign-in through it: as the
// organization's word for a provider only the organization vouches for,
// as proof once an IAM owner trusts the provider.
func TestFederatedSignInVerifiesEmail(t *testing.T) {
	e := afStartEnv(t, map[string]string{"GATEHOUSE_IDP_ALLOW_LOOPBACK": "true"})
	e.must("POST", "/management/v1/users/human/_import", e.admin, "", map[string]any{"userName": "fedora",
		"profile": map[string]any{"firstName": "Fe", "lastName": "Dora"}, "email": map[string]any{"email": "fedora@example.com"},
		"password": afPassword})
	op := startFakeOP(t, map[string]any{"sub": "fedora-sub", "name": "Fe Dora", "email": "Fedora@example.com", "email_verified": true})
	idp := e.must("POST", "/management/v1/idps/oidc", e.admin, "", op.config(map[string]any{"name": "Corp SSO"}))["idpId"].(string)
	c, p := e.fedSignIn(op, idp, "f1")
	e.code(afSubmit(t, c, e.base, p, url.Values{"loginName": {"fedora"}, "password": {afPassword}, "confirm": {"yes"}}), "f1", "n-f1")
	stored := func() (verified, proven bool) {
		t.Helper()
		if err := e.dirDB(t).QueryRow(`SELECT email_verified, email_proven FROM users WHERE user_name = 'fedora'`).Scan(&verified, &proven); err != nil {
			t.Fatal(err)
		}
		return verified, proven
	}
	if v, _ := stored(); v {
		t.Fatal("linking verified the address")
	}
	_, p = e.fedSignIn(op, idp, "f2")
	e.code(p, "f2", "n-f2")
	if v, pr := stored(); !v || pr {
		t.Fatalf("after a sign-in through an untrusted provider: verified %v proven %v; want the organization's word", v, pr)
	}
	e.must("POST", "/management/v1/idps/"+idp+"/_trust", e.admin, "", map[string]any{"trustAmr": true})
	_, p = e.fedSignIn(op, idp, "f3")
	e.code(p, "f3", "n-f3")
	if v, pr := stored(); !v || !pr {
		t.Fatalf("after a sign-in through a trusted provider: verified %v proven %v; want proof", v, pr)
	}
}
