package service_test

import (
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gatehouse-id/gatehouse/pkg/db"
	"github.com/gatehouse-id/gatehouse/services/authn/internal/login"
)

// signInAccount signs alice in through the account page of org1 and
// returns the account page.
func (e *env) signInAccount() response {
	e.t.Helper()
	page := e.follow(e.get("/ui/account?org=org1"))
	if !strings.Contains(page.body, `name="loginName"`) {
		e.t.Fatalf("want the login page first; got %d:\n%s", page.StatusCode, page.body)
	}
	page = e.follow(e.submit(page, url.Values{"loginName": {"alice"}}))
	r := e.submit(page, url.Values{"password": {"Alice-Pass-1"}})
	if r.StatusCode != http.StatusFound || r.Header.Get("Location") != login.PathAccount {
		e.t.Fatalf("the account sign-in ends at %d %q; want the account page", r.StatusCode, r.Header.Get("Location"))
	}
	page = e.follow(r)
	if page.StatusCode != http.StatusOK || !strings.Contains(page.body, "alice@") {
		e.t.Fatalf("the account page: %d:\n%s", page.StatusCode, page.body)
	}
	return page
}

// TestAccountSignInIssuesNothing: the account page's own sign-in ends on
// the account page, with no code or token, and a change that needs a
// fresh authentication (removing a factor, new recovery codes, adding a
// passkey) asks an older session to sign in again first.
func TestAccountSignInIssuesNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t, db.SQLite)
	page := e.signInAccount()
	csrf := hiddenRE.FindStringSubmatch(page.body)
	if csrf == nil {
		t.Fatalf("no CSRF token on the account page:\n%s", page.body)
	}

	// Within FreshAuth the change runs (the fake has no such factor).
	if r := e.post("/ui/account", url.Values{"csrf": {csrf[2]}, "action": {"remove"}, "type": {"otp"}}); r.StatusCode != http.StatusNotFound {
		t.Fatalf("a fresh session's removal: %d; want it run (404: no such factor)", r.StatusCode)
	}
	e.advance(login.FreshAuth + time.Second)
	for _, form := range []url.Values{
		{"action": {"remove"}, "type": {"otp"}},
		{"action": {"recovery"}},
	} {
		form.Set("csrf", csrf[2])
		r := e.post("/ui/account", form)
		loc := r.Header.Get("Location")
		if r.StatusCode != http.StatusSeeOther || !strings.HasPrefix(loc, "/ui/login/login?") {
			t.Fatalf("%v after %s: %d %q; want a new sign-in first", form, login.FreshAuth, r.StatusCode, loc)
		}
		if p := e.follow(r); !strings.Contains(p.body, `value="alice"`) && !strings.Contains(p.body, "alice@") {
			t.Fatalf("the new sign-in does not name the session's user:\n%s", p.body)
		}
	}
	if r := e.post("/ui/account/key", url.Values{"csrf": {csrf[2]}, "start": {"1"}, "type": {"passwordless"}}); r.StatusCode != http.StatusSeeOther || !strings.HasPrefix(r.Header.Get("Location"), "/ui/login/login?") {
		t.Fatalf("adding a passkey with an old session: %d %q", r.StatusCode, r.Header.Get("Location"))
	}

	// Sign out everywhere: the directory ends every session and token.
	page = e.follow(e.get("/ui/account"))
	csrf = hiddenRE.FindStringSubmatch(page.body)
	if r := e.post("/ui/account", url.Values{"csrf": {csrf[2]}, "action": {"signout"}}); r.StatusCode != http.StatusOK {
		t.Fatalf("sign out everywhere: %d", r.StatusCode)
	}
	if !slices.Contains(e.dir.SignedOut, "alice-id") {
		t.Fatalf("signed out %v; want alice's sessions ended in the directory", e.dir.SignedOut)
	}
	if p := e.follow(e.get("/ui/account?org=org1")); !strings.Contains(p.body, `name="loginName"`) {
		t.Fatalf("the account page after signing out: %d", p.StatusCode)
	}
	// Without a session or ?org=, the built-in CLI app's organization;
	// this fake has none, which the page says.
	if p := e.follow(e.get("/ui/account")); p.StatusCode != http.StatusNotFound || !strings.Contains(p.body, "?org=") {
		t.Fatalf("the account page without an organization: %d:\n%s", p.StatusCode, p.body)
	}
}
