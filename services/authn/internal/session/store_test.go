package session_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gatehouse-id/gatehouse/pkg/db"
	"github.com/gatehouse-id/gatehouse/pkg/testutil/dbtest"
	"github.com/gatehouse-id/gatehouse/services/authn/internal/authntest"
	"github.com/gatehouse-id/gatehouse/services/authn/internal/session"
)

var t0 = time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)

func newStore(t *testing.T, d db.Dialect) (*session.Store, session.UserAgent, string) {
	t.Helper()
	st := &session.Store{DB: authntest.Open(t, d)}
	cookie, ua := session.NewUserAgent()
	return st, ua, cookie
}

// rows counts a table's rows.
func rows(t *testing.T, st *session.Store, table string) int {
	t.Helper()
	var n int
	if err := st.DB.Get(context.Background(), &n, `SELECT COUNT(*) FROM `+table); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestUserAgents: a browser's identity is its cookie's; nothing is stored
// for it until a session is.
func TestUserAgents(t *testing.T) {
	authntest.Run(t, func(t *testing.T, d db.Dialect) {
		ctx := context.Background()
		st, ua, cookie := newStore(t, d)
		if ua.ID == cookie || ua.ID != session.UserAgentID(cookie) || ua.CSRFToken == "" || strings.Contains(ua.CSRFToken, cookie) {
			t.Errorf("user agent %+v for cookie: want the cookie's hash as id and a CSRF token apart from the cookie", ua)
		}
		got, err := session.ParseUserAgent(cookie)
		if err != nil || got != ua {
			t.Errorf("ParseUserAgent = %+v, %v; want %+v", got, err, ua)
		}
		if _, other := session.NewUserAgent(); other.ID == ua.ID || other.CSRFToken == ua.CSRFToken {
			t.Error("two new browsers share an identity")
		}
		for _, bad := range []string{"", "unknown", ua.ID, cookie[:42], cookie + "A", cookie[:42] + "!", cookie[:42] + "="} {
			if _, err := session.ParseUserAgent(bad); !errors.Is(err, session.ErrNotFound) {
				t.Errorf("cookie %q: %v; want ErrNotFound", bad, err)
			}
		}
		// A pending request of an anonymous browser stores the request only.
		if err := st.CreateAuthRequest(ctx, session.AuthRequest{ID: "r", UserAgentID: ua.ID, Params: []byte("{}"), CreatedAt: t0, ExpiresAt: t0.Add(time.Hour)}); err != nil {
			t.Fatal(err)
		}
		if n := rows(t, st, "user_agents"); n != 0 {
			t.Fatalf("%d user_agents rows for an anonymous browser; want none", n)
		}
		// Its first session records it; the sign-in's rotation moves the
		// request and the session to the new identity, and the old one's
		// row (none here) is gone.
		if err := st.CreateAuthRequest(ctx, session.AuthRequest{ID: "signing-in", UserAgentID: ua.ID, Params: []byte("{}"), CreatedAt: t0, ExpiresAt: t0.Add(time.Hour)}); err != nil {
			t.Fatal(err)
		}
		_, rotated, _, err := st.SignIn(ctx, ua.ID, session.Session{UserID: "alice", OrgID: "o", AuthTime: t0, AMR: []string{"pwd"}}, "signing-in", t0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.AuthRequest(ctx, "r", rotated.ID, t0); err != nil {
			t.Errorf("the pending request did not follow the rotation: %v", err)
		}
		if n := rows(t, st, "user_agents"); n != 1 {
			t.Errorf("%d user_agents rows after a sign-in; want 1", n)
		}
	})
}

func TestSessions(t *testing.T) {
	authntest.Run(t, func(t *testing.T, d db.Dialect) {
		ctx := context.Background()
		st, ua, _ := newStore(t, d)
		_, other := session.NewUserAgent()
		a, err := st.Upsert(ctx, session.Session{UserAgentID: ua.ID, UserID: "alice", OrgID: "o", LoginName: "alice@o", AuthTime: t0, AMR: []string{"pwd"}}, t0)
		if err != nil || a.ID == "" {
			t.Fatalf("Upsert = %+v, %v", a, err)
		}
		b, err := st.Upsert(ctx, session.Session{UserAgentID: ua.ID, UserID: "bob", OrgID: "o", LoginName: "bob@o", AuthTime: t0.Add(time.Minute), AMR: []string{"pwd"}}, t0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.Upsert(ctx, session.Session{UserAgentID: other.ID, UserID: "alice", OrgID: "o", AuthTime: t0, AMR: []string{"pwd"}}, t0); err != nil {
			t.Fatal(err)
		}
		// Re-authentication keeps the session id and moves auth_time.
		a2, err := st.Upsert(ctx, session.Session{UserAgentID: ua.ID, UserID: "alice", OrgID: "o", LoginName: "alice@o", AuthTime: t0.Add(2 * time.Minute), AMR: []string{"pwd"}}, t0)
		if err != nil || a2.ID != a.ID {
			t.Fatalf("re-auth: %+v, %v; want id %s", a2, err, a.ID)
		}
		list, expired, err := st.Sessions(ctx, ua.ID, t0)
		if err != nil || len(expired) != 0 {
			t.Fatalf("Sessions: %v, expired %+v; want none expired", err, expired)
		}
		if len(list) != 2 || list[0].ID != a.ID || list[1].ID != b.ID || !list[0].AuthTime.Equal(t0.Add(2*time.Minute)) ||
			list[0].LoginName != "alice@o" || len(list[0].AMR) != 1 || list[0].AMR[0] != "pwd" {
			t.Errorf("Sessions = %+v; want alice (latest login) then bob", list)
		}
		if err := st.Delete(ctx, a.ID); err != nil {
			t.Fatal(err)
		}
		if list, _, _ := st.Sessions(ctx, ua.ID, t0); len(list) != 1 || list[0].ID != b.ID {
			t.Errorf("after Delete: %+v; want bob only", list)
		}
		if list, _, _ := st.Sessions(ctx, other.ID, t0); len(list) != 1 {
			t.Errorf("other browser: %+v; want its own session untouched", list)
		}
	})
}

func TestConcurrentUpsertsShareOneSession(t *testing.T) {
	authntest.Run(t, func(t *testing.T, d db.Dialect) {
		st, ua, _ := newStore(t, d)
		const n = 8
		ids := make([]string, n)
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				s, err := st.Upsert(context.Background(), session.Session{UserAgentID: ua.ID, UserID: "alice", OrgID: "o", AuthTime: t0, AMR: []string{"pwd"}}, t0)
				ids[i], errs[i] = s.ID, err
			})
		}
		wg.Wait()
		for i := range n {
			if errs[i] != nil || ids[i] != ids[0] {
				t.Errorf("upsert %d: %s, %v; want %s", i, ids[i], errs[i], ids[0])
			}
		}
	})
}

func TestAuthRequests(t *testing.T) {
	authntest.Run(t, func(t *testing.T, d db.Dialect) {
		ctx := context.Background()
		st, ua, _ := newStore(t, d)
		_, other := session.NewUserAgent()
		ar := session.AuthRequest{ID: "req-1", UserAgentID: ua.ID, Params: []byte(`{"client_id":"web"}`), CreatedAt: t0, ExpiresAt: t0.Add(time.Minute)}
		if err := st.CreateAuthRequest(ctx, ar); err != nil {
			t.Fatal(err)
		}
		if err := st.CreateAuthRequest(ctx, ar); !errors.Is(err, db.ErrConflict) {
			t.Errorf("duplicate id: %v; want ErrConflict", err)
		}
		got, err := st.AuthRequest(ctx, "req-1", ua.ID, t0)
		if err != nil || string(got.Params) != `{"client_id":"web"}` || !got.ExpiresAt.Equal(ar.ExpiresAt) {
			t.Errorf("AuthRequest = %+v, %v", got, err)
		}
		if _, err := st.AuthRequest(ctx, "req-1", other.ID, t0); !errors.Is(err, session.ErrNotFound) {
			t.Errorf("another browser: %v; want ErrNotFound", err)
		}
		if _, err := st.AuthRequest(ctx, "req-1", ua.ID, t0.Add(time.Minute)); !errors.Is(err, session.ErrNotFound) {
			t.Errorf("expired: %v; want ErrNotFound", err)
		}
		if err := st.SetAuthRequestUser(ctx, "req-1", "alice@o", "alice"); err != nil {
			t.Fatal(err)
		}
		if got, _ := st.AuthRequest(ctx, "req-1", ua.ID, t0); got.LoginName != "alice@o" || got.UserID != "alice" {
			t.Errorf("after SetAuthRequestUser: %+v", got)
		}
		if err := st.SetAuthRequestUser(ctx, "nope", "x", ""); !errors.Is(err, session.ErrNotFound) {
			t.Errorf("SetAuthRequestUser(unknown) = %v; want ErrNotFound", err)
		}

		// Exactly one of concurrent completions wins.
		wins, errs := dbtest.Race(8, func(int) error { return st.ConsumeAuthRequest(context.Background(), "req-1") })
		for _, err := range errs {
			if !errors.Is(err, session.ErrNotFound) {
				t.Errorf("consume: %v", err)
			}
		}
		if wins != 1 {
			t.Errorf("%d consumers won; want exactly 1", wins)
		}

		for i, exp := range []time.Time{t0, t0.Add(time.Hour)} {
			if err := st.CreateAuthRequest(ctx, session.AuthRequest{ID: []string{"old", "new"}[i], UserAgentID: ua.ID, Params: []byte("{}"), CreatedAt: t0, ExpiresAt: exp}); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := st.Prune(ctx, t0.Add(time.Minute)); err != nil {
			t.Fatal(err)
		}
		if err := st.ConsumeAuthRequest(ctx, "old"); !errors.Is(err, session.ErrNotFound) {
			t.Errorf("pruned request: %v; want ErrNotFound", err)
		}
		if err := st.ConsumeAuthRequest(ctx, "new"); err != nil {
			t.Errorf("unexpired request was pruned: %v", err)
		}
	})
}

// TestPruneForgetsIdleBrowsers: a browser's row goes a day after its last
// session did, while a browser with a session or a pending request stays.
func TestPruneForgetsIdleBrowsers(t *testing.T) {
	authntest.Run(t, func(t *testing.T, d db.Dialect) {
		st := &session.Store{DB: authntest.Open(t, d)}
		ctx := context.Background()
		t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		signIn := func(id string) session.UserAgent {
			_, ua := session.NewUserAgent()
			if _, err := st.Upsert(ctx, session.Session{ID: id, UserAgentID: ua.ID, UserID: "u-" + id, OrgID: "o1", AuthTime: t0, AMR: []string{"pwd"}}, t0); err != nil {
				t.Fatal(err)
			}
			return ua
		}
		loggedOut, kept, pending := signIn("s1"), signIn("s2"), signIn("s3")
		list, _, err := st.Sessions(ctx, loggedOut.ID, t0)
		if err != nil || len(list) != 1 {
			t.Fatalf("Sessions = %v, %v", list, err)
		}
		if err := st.Delete(ctx, list[0].ID); err != nil {
			t.Fatal(err)
		}
		list, _, _ = st.Sessions(ctx, pending.ID, t0)
		if err := st.Delete(ctx, list[0].ID); err != nil {
			t.Fatal(err)
		}
		if err := st.CreateAuthRequest(ctx, session.AuthRequest{ID: "r1", UserAgentID: pending.ID, Params: []byte("{}"), CreatedAt: t0, ExpiresAt: t0.Add(48 * time.Hour)}); err != nil {
			t.Fatal(err)
		}
		if n, err := st.Prune(ctx, t0.Add(time.Hour)); err != nil || n != 0 {
			t.Fatalf("Prune within a day: %d rows, %v; want none", n, err)
		}
		// The session of kept stays live (idle within its lifetime):
		// re-authenticate just before the prune.
		if _, err := st.Upsert(ctx, session.Session{UserAgentID: kept.ID, UserID: "u-s2", OrgID: "o1", AuthTime: t0.Add(25 * time.Hour), AMR: []string{"pwd"}}, t0.Add(25*time.Hour)); err != nil {
			t.Fatal(err)
		}
		n, err := st.Prune(ctx, t0.Add(25*time.Hour))
		if err != nil || n != 1 {
			t.Fatalf("Prune: %d rows, %v; want the logged-out browser's row", n, err)
		}
		var ids []string
		if err := st.DB.Select(ctx, &ids, `SELECT id FROM user_agents ORDER BY id`); err != nil {
			t.Fatal(err)
		}
		want := []string{kept.ID, pending.ID}
		slices.Sort(want)
		if !slices.Equal(ids, want) {
			t.Errorf("browsers kept: %v; want the one with a session and the one with a pending request %v", ids, want)
		}
	})
}

// TestSignIn: a sign-in rotates the browser's identity, records the
// session and consumes the pending request at once; a request already
// consumed (a form sent twice) changes nothing.
func TestSignIn(t *testing.T) {
	authntest.Run(t, func(t *testing.T, d db.Dialect) {
		ctx := context.Background()
		st, ua, _ := newStore(t, d)
		// The browser has a session of bob already, and two pending requests.
		if _, err := st.Upsert(ctx, session.Session{UserAgentID: ua.ID, UserID: "bob", OrgID: "o", AuthTime: t0, AMR: []string{"pwd"}}, t0); err != nil {
			t.Fatal(err)
		}
		for _, id := range []string{"r1", "r2"} {
			if err := st.CreateAuthRequest(ctx, session.AuthRequest{ID: id, UserAgentID: ua.ID, Params: []byte("{}"), CreatedAt: t0, ExpiresAt: t0.Add(time.Hour)}); err != nil {
				t.Fatal(err)
			}
		}
		in := session.Session{UserAgentID: "ignored", UserID: "alice", OrgID: "o", LoginName: "alice@o", AuthTime: t0, AMR: []string{"pwd"}}
		cookie, rotated, s, err := st.SignIn(ctx, ua.ID, in, "r1", t0)
		if err != nil {
			t.Fatal(err)
		}
		if rotated.ID == ua.ID || session.UserAgentID(cookie) != rotated.ID || s.UserAgentID != rotated.ID || s.ID == "" || s.UserID != "alice" {
			t.Fatalf("SignIn = %+v on %+v; want alice's session on the new identity", s, rotated)
		}
		if !s.LastActive.Equal(t0) {
			t.Errorf("session last active %v; want the sign-in's time %v", s.LastActive, t0)
		}
		live, _, err := st.Sessions(ctx, rotated.ID, t0)
		if err != nil || len(live) != 2 {
			t.Fatalf("the new identity has %d live sessions (%v); want alice's and bob's", len(live), err)
		}
		if old, _, _ := st.Sessions(ctx, ua.ID, t0); len(old) != 0 {
			t.Errorf("the old identity still names %d sessions", len(old))
		}
		if _, err := st.AuthRequest(ctx, "r1", rotated.ID, t0); !errors.Is(err, session.ErrNotFound) {
			t.Errorf("the signed-in request is still pending: %v", err)
		}
		if _, err := st.AuthRequest(ctx, "r2", rotated.ID, t0); err != nil {
			t.Errorf("the other pending request did not follow the rotation: %v", err)
		}
		if n := rows(t, st, "user_agents"); n != 1 {
			t.Errorf("%d user_agents rows; want the new identity's only", n)
		}

		// r1 again: nothing changes, not even the identity.
		sessionsBefore := rows(t, st, "sessions")
		_, _, _, err = st.SignIn(ctx, rotated.ID, session.Session{UserID: "carol", OrgID: "o", AuthTime: t0, AMR: []string{"pwd"}}, "r1", t0)
		if !errors.Is(err, session.ErrNotFound) {
			t.Fatalf("a second sign-in for a consumed request: %v; want ErrNotFound", err)
		}
		if n := rows(t, st, "sessions"); n != sessionsBefore {
			t.Errorf("%d sessions after the refused sign-in; want %d", n, sessionsBefore)
		}
		if live, _, _ := st.Sessions(ctx, rotated.ID, t0); len(live) != 2 {
			t.Errorf("the refused sign-in moved the browser's sessions: %d left", len(live))
		}
		if _, err := st.AuthRequest(ctx, "r2", rotated.ID, t0); err != nil {
			t.Errorf("the refused sign-in moved the pending request: %v", err)
		}
	})
}

// TestChecksKeepWhatDidNotRun: a sign-in records the checks it ran; a
// later one of the same session (a step-up running only the second
// factor) keeps the times of the others. UserSessions lists the user's
// sessions of every browser.
func TestChecksKeepWhatDidNotRun(t *testing.T) {
	t.Parallel()
	authntest.Run(t, func(t *testing.T, d db.Dialect) {
		ctx := context.Background()
		st, ua, _ := newStore(t, d)
		in := session.Session{UserAgentID: ua.ID, UserID: "alice", OrgID: "o", AuthTime: t0, AMR: []string{"pwd"},
			Checks: session.Checks{Password: t0}}
		if _, err := st.Upsert(ctx, in, t0); err != nil {
			t.Fatal(err)
		}
		later := t0.Add(10 * time.Minute)
		in.AuthTime, in.AMR, in.Checks = later, []string{"pwd", "otp", "mfa"}, session.Checks{SecondFactor: later}
		if _, err := st.Upsert(ctx, in, later); err != nil {
			t.Fatal(err)
		}
		list, err := st.UserSessions(ctx, "alice", later)
		if err != nil || len(list) != 1 {
			t.Fatalf("UserSessions = %+v, %v", list, err)
		}
		c := list[0].Checks
		if !c.Password.Equal(t0) || !c.SecondFactor.Equal(later) || !c.MultiFactor.IsZero() {
			t.Fatalf("checks %+v; want the password's of the first sign-in and the second factor's of the step-up", c)
		}
		// A session from before the checks were recorded: its auth_time.
		if got := (session.Session{AuthTime: t0}).Checked(time.Time{}); !got.Equal(t0) {
			t.Fatalf("Checked(zero) = %v; want the auth_time", got)
		}
	})
}
