package session_test

import (
	"context"
	"errors"
	"io/fs"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/gatehouse-id/gatehouse/pkg/db"
	"github.com/gatehouse-id/gatehouse/services/authn/internal/authntest"
	"github.com/gatehouse-id/gatehouse/services/authn/internal/session"
	"github.com/gatehouse-id/gatehouse/services/authn/migrations"
)

var testLifetimes = session.Lifetimes{Idle: 30 * time.Minute, Absolute: 2 * time.Hour}

// clockStore is a store with testLifetimes and one browser, read at times
// the test chooses.
type clockStore struct {
	t  *testing.T
	st *session.Store
	ua string
}

func newClockStore(t *testing.T, d db.Dialect) clockStore {
	t.Helper()
	st := &session.Store{DB: authntest.Open(t, d), Lifetimes: testLifetimes}
	_, ua := session.NewUserAgent()
	return clockStore{t: t, st: st, ua: ua.ID}
}

func (c clockStore) signIn(user string, at time.Time) session.Session {
	c.t.Helper()
	s, err := c.st.Upsert(context.Background(), session.Session{UserAgentID: c.ua, UserID: user, OrgID: "o", LoginName: user + "@o",
		AuthTime: at, AMR: []string{"pwd"}}, at)
	if err != nil {
		c.t.Fatal(err)
	}
	return s
}

// ids lists the browser's live and expired session ids at now.
func (c clockStore) ids(now time.Time) (live, expired []string) {
	c.t.Helper()
	l, e, err := c.st.Sessions(context.Background(), c.ua, now)
	if err != nil {
		c.t.Fatal(err)
	}
	for _, s := range l {
		live = append(live, s.ID)
	}
	for _, s := range e {
		expired = append(expired, s.ID)
	}
	return live, expired
}

// wantLive checks that id is the browser's one session and live at now.
func (c clockStore) wantLive(id string, now time.Time, why string) {
	c.t.Helper()
	if live, expired := c.ids(now); len(live) != 1 || live[0] != id || len(expired) != 0 {
		c.t.Errorf("%s: live %v, expired %v; want %s live", why, live, expired, id)
	}
}

// wantExpired checks that id is the browser's one session and expired at now.
func (c clockStore) wantExpired(id string, now time.Time, why string) {
	c.t.Helper()
	if live, expired := c.ids(now); len(live) != 0 || len(expired) != 1 || expired[0] != id {
		c.t.Errorf("%s: live %v, expired %v; want %s expired", why, live, expired, id)
	}
}

// TestIdleLifetime: a session lives while now < last activity + idle; an
// answered request (Touch) is activity; once expired it is ended, stays
// so, and takes no more activity; a new sign-in opens a new session.
func TestIdleLifetime(t *testing.T) {
	authntest.Run(t, func(t *testing.T, d db.Dialect) {
		ctx := context.Background()
		c := newClockStore(t, d)
		s := c.signIn("alice", t0)
		if !s.LastActive.Equal(t0) {
			t.Errorf("LastActive after sign-in = %v; want %v", s.LastActive, t0)
		}
		c.wantLive(s.ID, t0.Add(29*time.Minute), "29m after the sign-in")
		if err := c.st.Touch(ctx, s.ID, t0.Add(29*time.Minute)); err != nil {
			t.Fatalf("Touch: %v", err)
		}
		c.wantLive(s.ID, t0.Add(58*time.Minute), "29m after the last activity")
		if list, _, _ := c.st.Sessions(ctx, c.ua, t0.Add(58*time.Minute)); len(list) != 1 || !list[0].LastActive.Equal(t0.Add(29*time.Minute)) {
			t.Errorf("Sessions = %+v; want LastActive %v", list, t0.Add(29*time.Minute))
		}
		// Exactly idle after the last activity: expired (now < last + idle).
		c.wantExpired(s.ID, t0.Add(59*time.Minute), "30m after the last activity")
		if err := c.st.Touch(ctx, s.ID, t0.Add(59*time.Minute)); !errors.Is(err, session.ErrNotFound) {
			t.Errorf("Touch of an expired session: %v; want ErrNotFound", err)
		}
		// Reading it expired ended it: not live even at an earlier time.
		c.wantExpired(s.ID, t0.Add(40*time.Minute), "ended session read at an earlier time")
		if err := c.st.Touch(ctx, s.ID, t0.Add(40*time.Minute)); !errors.Is(err, session.ErrNotFound) {
			t.Errorf("Touch of an ended session: %v; want ErrNotFound", err)
		}

		// Signing in again opens a new session (a new sid) in the row.
		again := c.signIn("alice", t0.Add(2*time.Hour))
		if again.ID == s.ID {
			t.Errorf("sign-in after expiry kept session id %s; want a new one", s.ID)
		}
		c.wantLive(again.ID, t0.Add(2*time.Hour+time.Minute), "new session")
		// A re-authentication of a live session keeps its id and is activity.
		re := c.signIn("alice", t0.Add(2*time.Hour+20*time.Minute))
		if re.ID != again.ID {
			t.Errorf("re-authentication of a live session: id %s; want %s", re.ID, again.ID)
		}
		c.wantLive(again.ID, t0.Add(2*time.Hour+49*time.Minute), "29m after the re-authentication")
	})
}

// TestAbsoluteLifetime: activity never keeps a session past auth_time +
// absolute; a re-authentication restarts it.
func TestAbsoluteLifetime(t *testing.T) {
	authntest.Run(t, func(t *testing.T, d db.Dialect) {
		ctx := context.Background()
		c := newClockStore(t, d)
		s := c.signIn("alice", t0)
		for at := 20 * time.Minute; at < 2*time.Hour; at += 20 * time.Minute {
			if err := c.st.Touch(ctx, s.ID, t0.Add(at)); err != nil {
				t.Fatalf("Touch at +%v: %v", at, err)
			}
		}
		c.wantLive(s.ID, t0.Add(2*time.Hour-time.Microsecond), "just before the absolute lifetime")
		if err := c.st.Touch(ctx, s.ID, t0.Add(2*time.Hour)); !errors.Is(err, session.ErrNotFound) {
			t.Errorf("Touch at the absolute lifetime: %v; want ErrNotFound", err)
		}
		c.wantExpired(s.ID, t0.Add(2*time.Hour), "at the absolute lifetime, active 20m before")

		// Another user's live session on the browser is not ended with it.
		c2 := newClockStore(t, d)
		a := c2.signIn("alice", t0)
		b := c2.signIn("bob", t0.Add(105*time.Minute))
		live, expired := c2.ids(t0.Add(2 * time.Hour))
		if len(live) != 1 || live[0] != b.ID || len(expired) != 1 || expired[0] != a.ID {
			t.Errorf("live %v, expired %v; want bob %s live and alice %s expired", live, expired, b.ID, a.ID)
		}
	})
}

// TestPruneExpiredSessions: an ended session goes EndedSessionRetention
// after it ended; one nobody read since its absolute lifetime passed (so
// never ended) goes that long after; live ones stay.
func TestPruneExpiredSessions(t *testing.T) {
	authntest.Run(t, func(t *testing.T, d db.Dialect) {
		ctx := context.Background()
		st := &session.Store{DB: authntest.Open(t, d), Lifetimes: testLifetimes}
		browser := func() clockStore {
			_, ua := session.NewUserAgent()
			return clockStore{t: t, st: st, ua: ua.ID}
		}
		ended, unread, active := browser(), browser(), browser()
		ended.signIn("alice", t0)
		ended.ids(t0.Add(time.Hour)) // idle: ended at +1h
		unread.signIn("bob", t0)     // never read again
		activeAt := t0.Add(24 * time.Hour)
		active.signIn("carol", activeAt)
		count := func(c clockStore) int {
			var n int
			if err := st.DB.Get(ctx, &n, `SELECT COUNT(*) FROM sessions WHERE user_agent_id = ?`, c.ua); err != nil {
				t.Fatal(err)
			}
			return n
		}
		for _, step := range []struct {
			at                    time.Time
			ended, unread, active int
		}{
			{t0.Add(25*time.Hour - time.Second), 1, 1, 1},
			{t0.Add(25 * time.Hour), 0, 1, 1},                         // ended at +1h, plus 24h
			{t0.Add(26*time.Hour - time.Second), 0, 1, 1},             // absolute lifetime passed at +2h
			{t0.Add(26 * time.Hour), 0, 0, 1},                         // … plus 24h
			{activeAt.Add(testLifetimes.Idle - time.Second), 0, 0, 1}, // still live
		} {
			if _, err := st.Prune(ctx, step.at); err != nil {
				t.Fatal(err)
			}
			if e, u, a := count(ended), count(unread), count(active); e != step.ended || u != step.unread || a != step.active {
				t.Errorf("after Prune at +%v: sessions ended %d unread %d active %d; want %d %d %d",
					step.at.Sub(t0), e, u, a, step.ended, step.unread, step.active)
			}
		}
	})
}

// TestMigrationBackfillsLastActivity: sessions stored before
// last_active_at existed count as last active when they authenticated;
// pending requests survive the later migrations (00007 rebuilds their
// table on SQLite).
func TestMigrationBackfillsLastActivity(t *testing.T) {
	authntest.Run(t, func(t *testing.T, d db.Dialect) {
		ctx := context.Background()
		before := fstest.MapFS{}
		err := fs.WalkDir(migrations.FS, ".", func(path string, e fs.DirEntry, err error) error {
			if err != nil || e.IsDir() || path[strings.LastIndexByte(path, '/')+1:] >= "00006_" {
				return err
			}
			b, err := fs.ReadFile(migrations.FS, path)
			before[path] = &fstest.MapFile{Data: b}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		o := authntest.Options(t, d)
		all := o.Migrations
		o.Migrations = before
		old, err := db.Open(ctx, o)
		if err != nil {
			t.Fatal(err)
		}
		for _, q := range []string{
			`INSERT INTO user_agents (id, created_at, last_seen_at, csrf_token) VALUES ('ua', ?, ?, 'x')`,
			`INSERT INTO sessions (id, user_agent_id, user_id, org_id, auth_time, amr, created_at) VALUES ('s1', 'ua', 'alice', 'o', ?, '["pwd"]', ?)`,
			`INSERT INTO auth_requests (id, user_agent_id, params, login_name, created_at, expires_at) VALUES ('r0', 'ua', '{}', 'alice', ?, ?)`,
		} {
			if _, err := old.Exec(ctx, q, t0.Add(time.Hour), t0); err != nil {
				t.Fatal(err)
			}
		}
		if err := old.Close(); err != nil {
			t.Fatal(err)
		}
		o.Migrations = all
		st := &session.Store{DB: authntest.OpenWith(t, o), Lifetimes: testLifetimes}
		c := clockStore{t: t, st: st, ua: "ua"}
		if list, _, _ := st.Sessions(ctx, "ua", t0.Add(time.Hour)); len(list) != 1 || !list[0].LastActive.Equal(t0.Add(time.Hour)) {
			t.Fatalf("Sessions after the migration = %+v; want s1 last active at its auth_time %v", list, t0.Add(time.Hour))
		}
		c.wantExpired("s1", t0.Add(time.Hour+testLifetimes.Idle), "idle since its auth_time")
		if ar, err := st.AuthRequest(ctx, "r0", "ua", t0.Add(-time.Minute)); err != nil || ar.LoginName != "alice" {
			t.Errorf("pending request after the migrations: %+v, %v", ar, err)
		}
	})
}
