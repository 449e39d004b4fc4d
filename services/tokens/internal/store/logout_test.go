package store

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/gatehouse-id/gatehouse/pkg/db"
	"github.com/gatehouse-id/gatehouse/pkg/logging"
	"github.com/gatehouse-id/gatehouse/pkg/testutil/dbtest"
	"github.com/gatehouse-id/gatehouse/services/tokens/migrations"
)

// openReplicas opens n handles on one fresh tokens database of dialect d,
// as n tokens replicas have.
func openReplicas(t *testing.T, d db.Dialect, n int) []*Store {
	t.Helper()
	o := dbtest.Options(t, d, "tokens", migrations.FS)
	o.Logger = logging.Discard()
	out := make([]*Store, n)
	for i := range out {
		out[i] = &Store{DB: dbtest.Open(t, o)}
	}
	return out
}

// queued lists the outbox as "session/client" pairs, sorted.
func queued(t *testing.T, s *Store) []string {
	t.Helper()
	var rows []Logout
	if err := s.DB.Select(context.Background(), &rows, `SELECT session_id, client_id, user_id, created_at, next_attempt_at, attempts
		FROM backchannel_logouts`); err != nil {
		t.Fatal(err)
	}
	out := make([]string, 0, len(rows))
	for _, r := range rows {
		out = append(out, r.SessionID+"/"+r.ClientID)
	}
	slices.Sort(out)
	return out
}

func sessionClients(t *testing.T, s *Store) int {
	t.Helper()
	var n int
	if err := s.DB.Get(context.Background(), &n, `SELECT COUNT(*) FROM session_clients`); err != nil {
		t.Fatal(err)
	}
	return n
}

var errRollback = errors.New("roll back")

// A session's apps move into the outbox in the revoking transaction: a
// rolled back revocation queues nothing and keeps them; a committed one
// queues each app once, and another session's apps stay.
func TestQueueSessionLogouts(t *testing.T) {
	dbtest.Run(t, func(t *testing.T, d db.Dialect) {
		s := openReplicas(t, d, 1)[0]
		ctx := context.Background()
		now := time.Now().UTC().Truncate(time.Second)
		for _, r := range [][3]string{{"s1", "app-a", "alice"}, {"s1", "app-b", "alice"}, {"s2", "app-a", "bob"}, {"s1", "app-a", "alice"}} {
			if err := s.RecordSessionClient(ctx, nil, r[0], r[1], r[2], now); err != nil {
				t.Fatal(err)
			}
		}
		if n := sessionClients(t, s); n != 3 {
			t.Fatalf("%d session_clients rows; want 3 (a repeated issue is one row)", n)
		}
		err := s.DB.InTx(ctx, func(tx *db.Tx) error {
			if n, err := s.QueueSessionLogouts(ctx, tx, "s1", now); err != nil || n != 2 {
				t.Fatalf("queued %d, %v; want 2", n, err)
			}
			return errRollback
		})
		if !errors.Is(err, errRollback) {
			t.Fatal(err)
		}
		if got := queued(t, s); len(got) != 0 || sessionClients(t, s) != 3 {
			t.Fatalf("after a rolled back revocation: outbox %v, %d session_clients rows; want none and 3", got, sessionClients(t, s))
		}
		if err := s.DB.InTx(ctx, func(tx *db.Tx) error {
			_, err := s.QueueSessionLogouts(ctx, tx, "s1", now)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		if got, want := queued(t, s), []string{"s1/app-a", "s1/app-b"}; !slices.Equal(got, want) || sessionClients(t, s) != 1 {
			t.Fatalf("outbox %v, %d session_clients rows; want %v and s2's one", got, sessionClients(t, s), want)
		}
		// A repeated logout (authn retried) finds nothing more to queue.
		if n, err := s.QueueSessionLogouts(ctx, nil, "s1", now); err != nil || n != 0 {
			t.Fatalf("second logout queued %d, %v; want 0", n, err)
		}
	})
}

// A user's cut-off queues the apps of the sessions that received tokens
// first at or before it, of that user only; a pair already queued stays
// as it is.
func TestQueueUserLogouts(t *testing.T) {
	dbtest.Run(t, func(t *testing.T, d db.Dialect) {
		s := openReplicas(t, d, 1)[0]
		ctx := context.Background()
		cut := time.Now().UTC().Truncate(time.Second)
		for _, r := range []struct {
			sid, client, user string
			at                time.Time
		}{
			{"old", "app-a", "alice", cut.Add(-time.Hour)},
			{"old", "app-b", "alice", cut},
			{"new", "app-a", "alice", cut.Add(time.Second)},
			{"bobs", "app-a", "bob", cut.Add(-time.Hour)},
		} {
			if err := s.RecordSessionClient(ctx, nil, r.sid, r.client, r.user, r.at); err != nil {
				t.Fatal(err)
			}
		}
		// A later issue in the old session keeps its first issue time.
		if err := s.RecordSessionClient(ctx, nil, "old", "app-a", "alice", cut.Add(2*time.Hour)); err != nil {
			t.Fatal(err)
		}
		n, err := s.QueueUserLogouts(ctx, nil, "alice", cut, cut.Add(time.Minute))
		if got, want := queued(t, s), []string{"old/app-a", "old/app-b"}; err != nil || n != 2 || !slices.Equal(got, want) {
			t.Fatalf("queued %d %v, %v; want %v", n, got, err, want)
		}
		if c := sessionClients(t, s); c != 2 {
			t.Fatalf("%d session_clients rows left; want alice's new session and bob's", c)
		}
		// The same pair noted again and cut again: still one row, with its
		// tries.
		if err := s.RecordSessionClient(ctx, nil, "old", "app-a", "alice", cut); err != nil {
			t.Fatal(err)
		}
		due, _, err := s.DueLogouts(ctx, cut.Add(time.Minute), 10)
		if err != nil || len(due) != 2 {
			t.Fatalf("due %v, %v", due, err)
		}
		if ok, err := s.ClaimLogout(ctx, &due[0], cut.Add(time.Minute), cut.Add(2*time.Minute)); !ok || err != nil {
			t.Fatalf("claim: %v %v", ok, err)
		}
		if n, err := s.QueueUserLogouts(ctx, nil, "alice", cut, cut.Add(time.Minute)); err != nil || n != 0 {
			t.Fatalf("repeated cut-off queued %d, %v; want 0", n, err)
		}
		var attempts int
		if err := s.DB.Get(ctx, &attempts, `SELECT attempts FROM backchannel_logouts WHERE session_id = ? AND client_id = ?`,
			due[0].SessionID, due[0].ClientID); err != nil || attempts != 1 {
			t.Fatalf("attempts %d, %v; want the claimed row untouched (1)", attempts, err)
		}
	})
}

// Of senders on several replicas that read one logout as due, exactly
// one claims it; nobody else can while its lease lasts; past the lease it
// is due again, and the late first sender's outcome no longer counts.
func TestClaimLogoutOnce(t *testing.T) {
	dbtest.Run(t, func(t *testing.T, d db.Dialect) {
		replicas := openReplicas(t, d, 4)
		s := replicas[0]
		ctx := context.Background()
		now := time.Now().UTC().Truncate(time.Second)
		for round := range 10 {
			sid := "s" + string(rune('a'+round))
			if err := s.RecordSessionClient(ctx, nil, sid, "app", "alice", now); err != nil {
				t.Fatal(err)
			}
			if _, err := s.QueueSessionLogouts(ctx, nil, sid, now); err != nil {
				t.Fatal(err)
			}
			due, _, err := s.DueLogouts(ctx, now, 10)
			if err != nil || len(due) != 1 {
				t.Fatalf("round %d: due %v, %v; want one", round, due, err)
			}
			claimed := make([]Logout, 8)
			wins, errs := dbtest.Race(8, func(i int) error {
				claimed[i] = due[0]
				ok, err := replicas[i%len(replicas)].ClaimLogout(ctx, &claimed[i], now, now.Add(time.Minute))
				if err == nil && !ok {
					return errLost
				}
				return err
			})
			if wins != 1 {
				t.Fatalf("round %d: %d concurrent claims won (%v); want 1", round, wins, errs)
			}
			for _, err := range errs {
				if !errors.Is(err, errLost) {
					t.Fatalf("round %d: %v", round, err)
				}
			}
			if err := s.DeleteLogout(ctx, due[0]); err != nil {
				t.Fatal(err)
			}
		}

		if err := s.RecordSessionClient(ctx, nil, "lease", "app", "alice", now); err != nil {
			t.Fatal(err)
		}
		if _, err := s.QueueSessionLogouts(ctx, nil, "lease", now); err != nil {
			t.Fatal(err)
		}
		due, _, _ := s.DueLogouts(ctx, now, 10)
		first := due[0]
		if ok, err := s.ClaimLogout(ctx, &first, now, now.Add(time.Minute)); !ok || err != nil || first.Attempts != 1 {
			t.Fatalf("claim: %v %v, attempts %d", ok, err, first.Attempts)
		}
		// Within the lease it is not due, and a stale read cannot claim it.
		later := now.Add(59 * time.Second)
		if due, next, err := s.DueLogouts(ctx, later, 10); err != nil || len(due) != 0 || !next.Equal(now.Add(time.Minute)) {
			t.Fatalf("within the lease: due %v, next %v, %v; want none, next at the lease's end", due, next, err)
		}
		stale := due[0]
		if ok, err := replicas[1].ClaimLogout(ctx, &stale, later, later.Add(time.Minute)); ok || err != nil {
			t.Fatalf("claim within the lease: %v, %v; want refused", ok, err)
		}
		// Past it (the first sender died or hangs), another sender takes it.
		past := now.Add(time.Minute)
		due, _, _ = s.DueLogouts(ctx, past, 10)
		if len(due) != 1 {
			t.Fatalf("past the lease: due %v; want the logout", due)
		}
		second := due[0]
		if ok, err := replicas[1].ClaimLogout(ctx, &second, past, past.Add(time.Minute)); !ok || err != nil || second.Attempts != 2 {
			t.Fatalf("claim past the lease: %v %v, attempts %d; want claimed, 2", ok, err, second.Attempts)
		}
		if ok, err := s.RetryLogout(ctx, first, past.Add(time.Second)); ok || err != nil {
			t.Fatalf("the first sender's late retry: %v, %v; want refused", ok, err)
		}
		if ok, err := replicas[1].RetryLogout(ctx, second, past.Add(10*time.Second)); !ok || err != nil {
			t.Fatalf("the second sender's retry: %v, %v", ok, err)
		}
		if due, next, _ := s.DueLogouts(ctx, past.Add(9*time.Second), 10); len(due) != 0 || !next.Equal(past.Add(10*time.Second)) {
			t.Fatalf("after the retry: due %v, next %v; want due at +10s", due, next)
		}
		if due, next, _ := s.DueLogouts(ctx, past.Add(10*time.Second), 10); len(due) != 1 || due[0].Attempts != 2 || !next.IsZero() {
			t.Fatalf("at the retry: due %v, next %v; want the logout with 2 attempts, nothing else", due, next)
		}
	})
}

var errLost = errors.New("lost the claim")

// Pruning drops a session's apps long after their last issue and outbox
// rows abandoned for longer than any sender retries.
func TestLogoutPruneSteps(t *testing.T) {
	dbtest.Run(t, func(t *testing.T, d db.Dialect) {
		s := openReplicas(t, d, 1)[0]
		ctx := context.Background()
		now := time.Now().UTC().Truncate(time.Second)
		const retention, abandon = 48 * time.Hour, 25 * time.Hour
		for _, r := range []struct {
			sid string
			at  time.Time
		}{{"stale", now.Add(-retention - time.Second)}, {"kept", now.Add(-retention + time.Second)}, {"touched", now.Add(-3 * retention)}} {
			if err := s.RecordSessionClient(ctx, nil, r.sid, "app", "alice", r.at); err != nil {
				t.Fatal(err)
			}
		}
		// An issue within the retention keeps an old session's row.
		if err := s.RecordSessionClient(ctx, nil, "touched", "app", "alice", now.Add(-time.Hour)); err != nil {
			t.Fatal(err)
		}
		for _, r := range []struct {
			sid string
			at  time.Time
		}{{"abandoned", now.Add(-abandon - time.Second)}, {"pending", now.Add(-abandon + time.Second)}} {
			if err := s.RecordSessionClient(ctx, nil, r.sid, "app", "alice", r.at); err != nil {
				t.Fatal(err)
			}
			if _, err := s.QueueSessionLogouts(ctx, nil, r.sid, r.at); err != nil {
				t.Fatal(err)
			}
		}
		p := &db.Pruner{DB: s.DB, Service: "tokens", Steps: LogoutPruneSteps(retention, abandon)}
		r, err := p.RunOnce(ctx, now)
		if err != nil {
			t.Fatal(err)
		}
		if r.Deleted["session_clients"] != 1 || r.Deleted["backchannel_logouts"] != 1 {
			t.Fatalf("deleted %v; want one session_clients row (stale) and one outbox row (abandoned)", r.Deleted)
		}
		var left []string
		if err := s.DB.Select(ctx, &left, `SELECT session_id FROM session_clients ORDER BY session_id`); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(left, []string{"kept", "touched"}) {
			t.Fatalf("session_clients left: %v; want kept, touched", left)
		}
		if got := queued(t, s); !slices.Equal(got, []string{"pending/app"}) {
			t.Fatalf("outbox left: %v; want pending/app", got)
		}
	})
}
