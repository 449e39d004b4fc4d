package service_test

import (
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/gatehouse-id/gatehouse/pkg/db"
	"github.com/gatehouse-id/gatehouse/services/authn/internal/authntest"
	"github.com/gatehouse-id/gatehouse/services/authn/internal/session"
	"github.com/gatehouse-id/gatehouse/services/authn/service"
)

// Session lifetimes through the authorization endpoint, on a fake clock.

var shortLifetimes = session.Lifetimes{Idle: 30 * time.Minute, Absolute: 2 * time.Hour}

func newLifetimesEnv(t *testing.T, d db.Dialect) *env {
	return newEnv(t, d, func(o *service.HandlerOptions) { o.Sessions = shortLifetimes })
}

// silent expects prompt=none to answer with a code of session sid.
func (e *env) silent(sid, why string) {
	e.t.Helper()
	r := e.authorize(codeParams("prompt", "none", "state", "pn"))
	if r.StatusCode != http.StatusFound || r.location().Query().Get("error") != "" {
		e.t.Fatalf("%s: prompt=none got %d %s; want a code", why, r.StatusCode, r.Header.Get("Location"))
	}
	if c := e.tok.Code(e.code(r.location(), "pn")); c.GetSessionId() != sid {
		e.t.Errorf("%s: code of session %s; want %s", why, c.GetSessionId(), sid)
	}
}

// loginRequired expects prompt=none to answer login_required with desc.
func (e *env) loginRequired(desc, why string) {
	e.t.Helper()
	r := e.authorize(codeParams("prompt", "none", "state", "pn"))
	wantError(e.t, r, webRedirect, "login_required", "pn", false)
	if got := r.location().Query().Get("error_description"); got != desc {
		e.t.Errorf("%s: error_description %q; want %q", why, got, desc)
	}
}

func TestSessionIdleLifetime(t *testing.T) {
	authntest.Run(t, func(t *testing.T, d db.Dialect) {
		e := newLifetimesEnv(t, d)
		sid := e.tok.Code(e.code(e.login(codeParams(), "alice", "Alice-Pass-1"), "st-1")).GetSessionId()

		// Each answered request is activity: 29 minutes apart, the session
		// lives on (within the absolute lifetime, 2h).
		for range 2 {
			e.advance(29 * time.Minute)
			e.silent(sid, "29 minutes after the last activity")
		}
		// The interactive path answers and counts too.
		e.advance(29 * time.Minute)
		if c := e.tok.Code(e.code(e.authorize(codeParams()).location(), "st-1")); c.GetSessionId() != sid {
			t.Fatalf("SSO: session %s; want %s", c.GetSessionId(), sid)
		}
		e.advance(29 * time.Minute)
		e.silent(sid, "29 minutes after an interactive request")

		// 30 minutes without activity: the session is gone.
		e.advance(30 * time.Minute)
		e.loginRequired("the session has expired", "idle")
		// select_account lists no session: it goes on to the login page.
		if page := e.follow(e.authorize(codeParams("prompt", "select_account"))); !strings.Contains(page.body, `name="loginName"`) ||
			strings.Contains(page.body, "sessionID") {
			t.Errorf("select_account after expiry: want the login page, no session to choose:\n%s", page.body)
		}
		// An interactive request shows the login page for the account.
		r := e.authorize(codeParams())
		if !strings.HasPrefix(r.Header.Get("Location"), "/ui/login/login?") {
			t.Fatalf("Location %q; want the login page", r.Header.Get("Location"))
		}
		page := e.follow(r)
		if !strings.Contains(page.body, `value="alice@acme.example"`) {
			t.Errorf("login page not pre-filled with the expired session's account:\n%s", page.body)
		}
		page = e.follow(e.submit(page, url.Values{"loginName": {"alice@acme.example"}}))
		again := e.tok.Code(e.code(e.password(page, "Alice-Pass-1"), "st-1"))
		if again.GetSessionId() == sid || !again.GetAuthTime().AsTime().Equal(e.clock()) {
			t.Errorf("sign-in after expiry: session %s auth_time %v; want a new session authenticated now", again.GetSessionId(), again.GetAuthTime().AsTime())
		}
		e.silent(again.GetSessionId(), "new session")
		// A login_hint for another user still wins over the expired account.
		e.advance(31 * time.Minute)
		if page := e.follow(e.authorize(codeParams("login_hint", "bob@acme.example"))); !strings.Contains(page.body, `value="bob@acme.example"`) {
			t.Errorf("login_hint not pre-filled after expiry:\n%s", page.body)
		}
	})
}

func TestSessionAbsoluteLifetime(t *testing.T) {
	authntest.Run(t, func(t *testing.T, d db.Dialect) {
		e := newLifetimesEnv(t, d)
		sid := e.tok.Code(e.code(e.login(codeParams(), "alice", "Alice-Pass-1"), "st-1")).GetSessionId()
		for range 4 {
			e.advance(25 * time.Minute)
			e.silent(sid, "within the absolute lifetime")
		}
		// 2h after the sign-in, active 20 minutes ago: gone all the same.
		e.advance(20 * time.Minute)
		e.loginRequired("the session has expired", "absolute")

		// prompt=login re-authenticates: a new absolute lifetime (a new
		// session, since the old one ended).
		u := e.login(codeParams("prompt", "login"), "alice", "Alice-Pass-1")
		sid = e.tok.Code(e.code(u, "st-1")).GetSessionId()
		e.advance(25 * time.Minute)
		e.silent(sid, "after the re-authentication")
	})
}

// TestSessionEndsWhileAnswering: a session that expires between the read
// and the answer (here: while the directory checks its user) answers
// nothing.
func TestSessionEndsWhileAnswering(t *testing.T) {
	e := newLifetimesEnv(t, db.SQLite)
	e.code(e.login(codeParams(), "alice", "Alice-Pass-1"), "st-1")
	e.advance(30*time.Minute - time.Second)
	e.dir.OnGetUser = func() { e.advance(time.Second) }
	e.loginRequired("the session has ended", "expired while answering")
	codes := len(e.tok.Codes)

	e.dir.OnGetUser = nil
	e.newBrowser()
	e.login(codeParams(), "alice", "Alice-Pass-1")
	e.advance(30*time.Minute - time.Second)
	e.dir.OnGetUser = func() { e.advance(time.Second) }
	r := e.authorize(codeParams())
	e.dir.OnGetUser = nil
	if !strings.HasPrefix(r.Header.Get("Location"), "/ui/login/login?") {
		t.Fatalf("interactive: Location %q; want the login page", r.Header.Get("Location"))
	}
	if page := e.follow(r); !strings.Contains(page.body, `value="alice@acme.example"`) {
		t.Errorf("login page not pre-filled with the session's account:\n%s", page.body)
	}
	if len(e.tok.Codes) != codes+1 {
		t.Errorf("%d codes; want only the sign-in's, none for an ended session", len(e.tok.Codes)-codes)
	}
}

// TestEndSessionIgnoresExpiredSessions: at logout an expired session is
// gone: a browser holding only expired sessions logs out without a
// confirmation and without revoking; a hint of an expired session is not
// this browser's session, so the user confirms, and then its tokens are
// revoked.
func TestEndSessionIgnoresExpiredSessions(t *testing.T) {
	authntest.Run(t, func(t *testing.T, d db.Dialect) {
		e := newLifetimesEnv(t, d)
		sid := e.tok.Code(e.code(e.login(codeParams(), "alice", "Alice-Pass-1"), "st-1")).GetSessionId()
		e.tok.AddHint("alice-token", "alice-id", "web", sid, false)
		e.advance(31 * time.Minute)
		loggedOutPage(t, e.get("/oidc/v1/end_session"))
		if got := e.tok.RevokedSessions(); len(got) != 0 {
			t.Errorf("revoked %v; want nothing for an expired session without a hint", got)
		}
		// The logout forgot the expired account.
		if page := e.follow(e.authorize(codeParams())); strings.Contains(page.body, "alice@acme.example") {
			t.Errorf("login page after logout still offers the expired account:\n%s", page.body)
		}

		e.newBrowser()
		sid = e.tok.Code(e.code(e.login(codeParams(), "alice", "Alice-Pass-1"), "st-1")).GetSessionId()
		e.tok.AddHint("alice-token-2", "alice-id", "web", sid, false)
		e.advance(31 * time.Minute)
		page := e.get("/oidc/v1/end_session?id_token_hint=alice-token-2")
		confirmPage(t, e, page)
		if strings.Contains(page.body, "alice@acme.example") {
			t.Errorf("confirmation lists the expired session:\n%s", page.body)
		}
		loggedOutPage(t, e.submit(page, nil))
		if got := e.tok.RevokedSessions(); !slices.Equal(got, []string{sid}) {
			t.Errorf("revoked %v; want the hinted session %s", got, sid)
		}
	})
}

// TestPasswordCheckLifetime: the login policy's passwordCheckLifetime
// re-runs the password of a session whose check is older, even while the
// session lives; prompt=none answers login_required.
func TestPasswordCheckLifetime(t *testing.T) {
	t.Parallel()
	e := newEnv(t, db.SQLite)
	e.dir.Orgs["org1"].LoginPolicy.PasswordCheckLifetime = durationpb.New(40 * time.Minute)
	sid := e.tok.Code(e.code(e.login(codeParams(), "alice", "Alice-Pass-1"), "st-1")).GetSessionId()
	e.advance(39 * time.Minute)
	e.silent(sid, "within the password check lifetime")
	e.advance(2 * time.Minute)
	e.loginRequired("a check of the session is older than the login policy allows", "past the password check lifetime")
	r := e.authorize(codeParams())
	if r.StatusCode != http.StatusFound || !strings.HasPrefix(r.Header.Get("Location"), "/ui/login/password?") {
		t.Fatalf("past the password check lifetime: %d %q; want the password page", r.StatusCode, r.Header.Get("Location"))
	}
	// The password again: the same session, answering once more.
	if c := e.tok.Code(e.code(e.password(e.follow(r), "Alice-Pass-1"), "st-1")); c.GetSessionId() != sid {
		t.Fatalf("after the password: session %s; want %s", c.GetSessionId(), sid)
	}
	e.silent(sid, "right after the password")
}
