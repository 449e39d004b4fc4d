package revocation

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gatehouse-id/gatehouse/pkg/db"
)

// TestRevokedSeenByAnotherReplica: a revocation made by one replica is
// reported by a replica started afterwards, and (where several processes
// may share the database) by one that was already running and trusting
// its list.
func TestRevokedSeenByAnotherReplica(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		a := e.replica(t)
		var running *List
		if e.redis || e.dialect == db.Postgres {
			running = e.replica(t)
			mustSync(t, running) // loaded marker written: misses are trusted
			wantRevoked(t, running, "tok-1", false)
		}

		mustRevoke(t, a, "tok-1", t0.Add(time.Hour))
		wantRevoked(t, a, "tok-1", true)
		wantRevoked(t, a, "tok-2", false)

		fresh := e.replica(t)
		wantRevoked(t, fresh, "tok-1", true)
		wantRevoked(t, fresh, "tok-2", false)
		mustSync(t, fresh)
		wantRevoked(t, fresh, "tok-1", true)
		wantRevoked(t, fresh, "tok-2", false)

		if running != nil {
			wantRevoked(t, running, "tok-1", true)
			wantRevoked(t, running, "tok-2", false)
		}
	})
}

// TestRevokeMany revokes a refresh family at once; invalid input is
// refused and writes nothing.
func TestRevokeMany(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		l := e.replica(t)
		exp := t0.Add(time.Hour)
		ids := []string{"fam-a", "fam-b", "fam-a", "fam-c"}
		exps := []time.Time{exp, exp, exp.Add(time.Minute), exp}
		if err := l.RevokeMany(ctx, ids, exps); err != nil {
			t.Fatalf("RevokeMany: %v", err)
		}
		other := e.replica(t)
		for _, id := range []string{"fam-a", "fam-b", "fam-c"} {
			wantRevoked(t, l, id, true)
			wantRevoked(t, other, id, true)
		}
		// The duplicate kept its later expiry.
		e.clock.Advance(time.Hour + 30*time.Second)
		wantRevoked(t, l, "fam-a", true)
		wantRevoked(t, other, "fam-b", false)

		if err := l.RevokeMany(ctx, nil, nil); err != nil {
			t.Fatalf("RevokeMany(nil): %v", err)
		}
		later := e.clock.Now().Add(time.Hour)
		for name, c := range map[string]struct {
			ids  []string
			exps []time.Time
		}{
			"length mismatch": {[]string{"bad-1", "bad-2"}, []time.Time{later}},
			"empty id":        {[]string{"bad-1", ""}, []time.Time{later, later}},
			"zero expiry":     {[]string{"bad-1", "bad-2"}, []time.Time{later, {}}},
		} {
			err := l.RevokeMany(ctx, c.ids, c.exps)
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("%s: got %v; want ErrInvalid", name, err)
			}
			wantRevoked(t, l, "bad-1", false)
			wantRevoked(t, other, "bad-1", false)
		}
		var n int
		if err := e.store.Get(ctx, &n, `SELECT COUNT(*) FROM revoked_tokens WHERE token_id LIKE 'bad-%'`); err != nil {
			t.Fatal(err)
		}
		if n != 0 {
			t.Fatalf("rows written by refused requests: got %d; want 0", n)
		}
	})
}

// TestExpiredNotReported: a revocation counts until the token's expiry and
// not after; Prune then deletes its row and keeps the others.
func TestExpiredNotReported(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		l := e.replica(t)
		mustRevoke(t, l, "short", t0.Add(time.Minute))
		mustRevoke(t, l, "long", t0.Add(time.Hour))
		mustRevoke(t, l, "dead", t0.Add(-time.Second)) // already expired: accepted, never reported
		wantRevoked(t, l, "dead", false)
		wantRevoked(t, l, "short", true)

		e.clock.Advance(time.Minute)
		other := e.replica(t)
		for _, r := range []*List{l, other} {
			wantRevoked(t, r, "short", false)
			wantRevoked(t, r, "long", true)
		}
		n, err := l.Prune(ctx)
		if err != nil || n != 2 {
			t.Fatalf("Prune: got %d, %v; want 2 (short and dead), nil", n, err)
		}
		if n, err := other.Prune(ctx); err != nil || n != 0 {
			t.Fatalf("second Prune: got %d, %v; want 0, nil", n, err)
		}
		for _, r := range []*List{l, other, e.replica(t)} {
			wantRevoked(t, r, "long", true)
			wantRevoked(t, r, "short", false)
		}
	})
}

// TestRevokeAgainKeepsLaterExpiry: revoking an id again with an earlier
// expiry never shortens its revocation, in the table or the fast list.
func TestRevokeAgainKeepsLaterExpiry(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		l := e.replica(t)
		mustRevoke(t, l, "tok", t0.Add(2*time.Hour))
		mustRevoke(t, l, "tok", t0.Add(time.Hour))
		e.clock.Advance(90 * time.Minute)
		wantRevoked(t, l, "tok", true)
		wantRevoked(t, e.replica(t), "tok", true)
		e.clock.Advance(30 * time.Minute)
		wantRevoked(t, l, "tok", false)
	})
}

// TestRedisFlushRebuilds: after Redis loses every key (the marker too) a
// revoked token stays revoked — answered from the database — and Sync
// rebuilds the list, after which Redis answers by itself.
func TestRedisFlushRebuilds(t *testing.T) {
	forEachDialectWithRedis(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		a := e.replica(t)
		mustSync(t, a)
		mustRevoke(t, a, "tok-1", t0.Add(time.Hour))
		mustRevoke(t, a, "tok-2", t0.Add(time.Hour))

		e.flushRedis(t)
		b := e.replica(t)
		for _, r := range []*List{a, b} {
			wantRevoked(t, r, "tok-1", true)
			wantRevoked(t, r, "tok-3", false)
		}

		e.waitLoaded(t, b)
		if n, err := e.rdb.Exists(ctx, e.prefix+"revocations:loaded", e.prefix+"revoked:tok-1", e.prefix+"revoked:tok-2").Result(); err != nil || n != 3 {
			t.Fatalf("keys after rebuild: got %d, %v; want marker and both entries", n, err)
		}
		if ttl := e.rdb.PTTL(ctx, e.prefix+"revoked:tok-1").Val(); ttl <= 0 {
			t.Fatalf("entry TTL after rebuild: got %v; want positive", ttl)
		}

		// Take the row out of the table behind the list's back: only the
		// rebuilt Redis entry can still answer.
		if _, err := e.store.Exec(ctx, `DELETE FROM revoked_tokens WHERE token_id = ?`, "tok-1"); err != nil {
			t.Fatal(err)
		}
		wantRevoked(t, a, "tok-1", true)
		// And after another flush the table is the truth again.
		e.flushRedis(t)
		wantRevoked(t, a, "tok-1", false)
		wantRevoked(t, a, "tok-2", true)
	})
}

// TestRebuildInterruptedByFlush: a flush during a rebuild leaves no marker,
// so misses stay untrusted until a complete rebuild.
func TestRebuildInterruptedByFlush(t *testing.T) {
	e := newEnv(t, db.SQLite, true)
	ctx := context.Background()
	l := e.replica(t)
	mustRevoke(t, l, "tok-1", t0.Add(time.Hour))
	e.flushRedis(t)

	done, err := l.redis.rebuild(ctx, e.clock.Now, func(fn func([]entry) error) error {
		if err := fn([]entry{{ID: "tok-1", ExpiresAt: t0.Add(time.Hour)}}); err != nil {
			return err
		}
		e.flushRedis(t) // Redis restarts after the first page
		return nil
	})
	if done || !errors.Is(err, errRebuildInterrupted) {
		t.Fatalf("rebuild: got %v, %v; want false, errRebuildInterrupted", done, err)
	}
	if loaded, err := l.redis.markerExists(ctx); err != nil || loaded {
		t.Fatalf("marker after interrupted rebuild: got %v, %v; want false", loaded, err)
	}
	wantRevoked(t, l, "tok-1", true)
	e.waitLoaded(t, l)
	wantRevoked(t, l, "tok-1", true)
	wantRevoked(t, l, "tok-2", false)
}

// TestRebuildLockedByAnotherReplica: while another replica holds the
// rebuild lock, a replica does not write the marker and keeps answering
// from the database.
func TestRebuildLockedByAnotherReplica(t *testing.T) {
	e := newEnv(t, db.SQLite, true)
	ctx := context.Background()
	l := e.replica(t)
	mustRevoke(t, l, "tok-1", t0.Add(time.Hour))
	e.flushRedis(t)
	if err := e.rdb.Set(ctx, e.prefix+"revocations:loading", "someone-else", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	mustSync(t, l)
	if loaded, _ := l.redis.markerExists(ctx); loaded {
		t.Fatal("marker written while another replica held the rebuild lock")
	}
	wantRevoked(t, l, "tok-1", true)
	wantRevoked(t, l, "tok-2", false)
}

// TestRedisUnreachable: with Redis down, revocations are still recorded and
// reported (from the database) and no error reaches the caller; a healthy
// replica's Sync later pushes what the failing one could not.
func TestRedisUnreachable(t *testing.T) {
	forEachDialectWithRedis(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		healthy := e.replica(t)
		mustSync(t, healthy)
		down := e.replicaWith(t, unreachableRedis, Options{})

		mustRevoke(t, healthy, "by-healthy", t0.Add(time.Hour))
		wantRevoked(t, down, "by-healthy", true)

		mustRevoke(t, down, "by-down", t0.Add(time.Hour))
		wantRevoked(t, down, "by-down", true)
		wantRevoked(t, down, "unknown", false)
		if err := down.Sync(ctx); err == nil {
			t.Fatal("Sync with Redis unreachable: got nil error")
		}

		var pending bool
		if err := e.store.Get(ctx, &pending, `SELECT pending FROM revoked_tokens WHERE token_id = ?`, "by-down"); err != nil || !pending {
			t.Fatalf("row revoked while Redis was down: pending = %v, %v; want true", pending, err)
		}
		mustSync(t, healthy)
		if n := e.rdb.Exists(ctx, e.prefix+"revoked:by-down").Val(); n != 1 {
			t.Fatalf("entry pushed by healthy replica's Sync: got %d keys; want 1", n)
		}
		if err := e.store.Get(ctx, &pending, `SELECT pending FROM revoked_tokens WHERE token_id = ?`, "by-down"); err != nil || pending {
			t.Fatalf("after Sync: pending = %v, %v; want false", pending, err)
		}
		wantRevoked(t, healthy, "by-down", true)
	})
}

// TestMemoryBound: beyond MaxMemoryEntries the list answers misses from
// the database; once Prune has made room it trusts them again.
func TestMemoryBound(t *testing.T) {
	e := newEnv(t, db.SQLite, false)
	ctx := context.Background()
	l := e.replicaWith(t, "", Options{MaxMemoryEntries: 2})
	mustSync(t, l)
	if l.mem.needsLoad() {
		t.Fatal("empty table loaded: misses not trusted")
	}
	mustRevoke(t, l, "a", t0.Add(time.Minute))
	mustRevoke(t, l, "b", t0.Add(time.Minute))
	mustRevoke(t, l, "c", t0.Add(time.Hour))
	if !l.mem.needsLoad() {
		t.Fatal("overflowing list still trusts misses")
	}
	for _, id := range []string{"a", "b", "c"} {
		wantRevoked(t, l, id, true)
	}
	wantRevoked(t, l, "d", false)

	e.clock.Advance(time.Minute)
	if n, err := l.Prune(ctx); err != nil || n != 2 {
		t.Fatalf("Prune: got %d, %v; want 2, nil", n, err)
	}
	if l.mem.needsLoad() {
		t.Fatal("after Prune made room: misses still not trusted")
	}
	wantRevoked(t, l, "c", true)
	wantRevoked(t, l, "a", false)
	if got := len(l.mem.m); got != 1 {
		t.Fatalf("entries in memory: got %d; want 1", got)
	}
}

// TestConcurrentRevokeAndCheck: a revocation is visible to every replica
// as soon as Revoke returns, under concurrent writers.
func TestConcurrentRevokeAndCheck(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		a := e.replica(t)
		var b *List
		if e.redis || e.dialect == db.Postgres {
			b = e.replica(t)
		} else {
			b = a // one process owns a SQLite file
		}
		mustSync(t, a)
		mustSync(t, b)
		var wg sync.WaitGroup
		errs := make(chan error, 64)
		for w := range 6 {
			wg.Go(func() {
				for i := range 15 {
					id := fmt.Sprintf("w%d-%d", w, i)
					if err := a.Revoke(ctx, id, t0.Add(time.Hour)); err != nil {
						errs <- err
						return
					}
					if ok, err := b.IsRevoked(ctx, id); err != nil || !ok {
						errs <- fmt.Errorf("IsRevoked(%s) right after Revoke: got %v, %v; want true", id, ok, err)
						return
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
	})
}

func TestNewRedisClient(t *testing.T) {
	_, err := NewRedisClient("redis://user:hunter2@[::1")
	if err == nil || strings.Contains(err.Error(), "hunter2") {
		t.Fatalf("bad URL: got %v; want an error without the password", err)
	}
	c, err := NewRedisClient("redis://127.0.0.1:6379/0")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if o := c.Options(); o.ReadTimeout != 500*time.Millisecond || o.MaxRetries != 1 || o.DialTimeout != time.Second || o.DialerRetries != 1 {
		t.Fatalf("defaults: got read %v, retries %d, dial %v, dial attempts %d; want 500ms, 1, 1s, 1",
			o.ReadTimeout, o.MaxRetries, o.DialTimeout, o.DialerRetries)
	}
	c2, err := NewRedisClient("redis://127.0.0.1:6379/0?read_timeout=3s&max_retries=4")
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	if o := c2.Options(); o.ReadTimeout != 3*time.Second || o.MaxRetries != 4 {
		t.Fatalf("URL settings: got read %v, retries %d; want 3s, 4", o.ReadTimeout, o.MaxRetries)
	}
}

// TestMissesDistrustedAfterRedisFailure: a replica that saw Redis fail
// answers misses from the database until a sync has pushed every pending
// row, so a revocation another replica could not push is not missed when
// Redis comes back.
func TestMissesDistrustedAfterRedisFailure(t *testing.T) {
	forEachDialectWithRedis(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		a := e.replica(t)
		mustSync(t, a)
		down := e.replicaWith(t, unreachableRedis, Options{})
		mustRevoke(t, down, "lost-push", t0.Add(time.Hour))

		// a saw an error, then Redis answers again (still without the entry).
		a.markRedisDown()
		a.downUntil.Store(0)
		wantRevoked(t, a, "lost-push", true)
		mustSync(t, a)
		if a.dirty() {
			t.Fatal("dirty after a complete sync")
		}
		if n := e.rdb.Exists(ctx, e.prefix+"revoked:lost-push").Val(); n != 1 {
			t.Fatalf("entry after sync: got %d keys; want 1", n)
		}
		wantRevoked(t, a, "lost-push", true)
		wantRevoked(t, a, "never", false)
	})
}

// TestRun: the maintenance loop pushes pending rows and prunes expired
// ones, and returns when its context ends.
func TestRun(t *testing.T) {
	forEachDialectWithRedis(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		down := e.replicaWith(t, unreachableRedis, Options{})
		mustRevoke(t, down, "pending", t0.Add(time.Hour))
		mustRevoke(t, down, "old", t0.Add(time.Minute))
		e.clock.Advance(2 * time.Minute)

		l := e.replicaWith(t, e.redisURL, Options{SyncInterval: 10 * time.Millisecond, PruneInterval: 10 * time.Millisecond})
		runCtx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() { defer close(done); l.Run(runCtx) }()
		defer func() { cancel(); <-done }()

		// Run's rounds are Redis and database I/O, which no synctest
		// bubble can wait out: poll for their effect.
		deadline := time.Now().Add(30 * time.Second)
		for {
			var rows int
			if err := e.store.Get(ctx, &rows, `SELECT COUNT(*) FROM revoked_tokens WHERE token_id = 'old'`); err != nil {
				t.Fatal(err)
			}
			pushed := e.rdb.Exists(ctx, e.prefix+"revoked:pending").Val() == 1
			if rows == 0 && pushed {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("after 30s of Run: expired row present = %v, pending entry pushed = %v", rows > 0, pushed)
			}
			time.Sleep(10 * time.Millisecond)
		}
		cancel()
		<-done
		wantRevoked(t, l, "pending", true)
	})
}

// TestStaleMarkerDistrusted: a marker written during another Redis server
// lifetime (a restart from a snapshot, a failover) does not vouch for the
// list: a new connection drops it, misses go to the database, and the
// rebuild binds the new marker to the answering server.
func TestStaleMarkerDistrusted(t *testing.T) {
	forEachDialectWithRedis(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		a := e.replica(t)
		mustSync(t, a)
		// The revocation is in the table but, as after a restore from an
		// older snapshot, not in Redis; the marker is an earlier server's.
		mustRevoke(t, a, "tok-1", t0.Add(time.Hour))
		if err := e.rdb.Del(ctx, e.prefix+"revoked:tok-1").Err(); err != nil {
			t.Fatal(err)
		}
		if err := e.rdb.Set(ctx, e.prefix+"revocations:loaded", "an-earlier-run-id", 0).Err(); err != nil {
			t.Fatal(err)
		}
		b := e.replica(t) // new connections, as after a restart
		wantRevoked(t, b, "tok-1", true)
		wantRevoked(t, b, "tok-2", false)
		e.waitLoaded(t, b)
		id, err := runID(ctx, e.rdb)
		if err != nil || id == "" {
			t.Fatalf("run_id: %q, %v", id, err)
		}
		if got := e.rdb.Get(ctx, e.prefix+"revocations:loaded").Val(); got != id {
			t.Fatalf("marker after rebuild = %q; want the server's run_id %q", got, id)
		}
		if n := e.rdb.Exists(ctx, e.prefix+"revoked:tok-1").Val(); n != 1 {
			t.Fatal("rebuild did not restore the entry")
		}
		// A marker of this server's lifetime stays.
		c := e.replica(t)
		wantRevoked(t, c, "tok-1", true)
		if got := e.rdb.Get(ctx, e.prefix+"revocations:loaded").Val(); got != id {
			t.Fatalf("marker after a new connection = %q; want it kept", got)
		}
	})
}

// TestTokenRevoked: one lookup answers for a token's own revocation and
// its user's cut-off, on every backend, and with Redis flushed (each key
// then falls back to the table).
func TestTokenRevoked(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		l := e.replica(t)
		mustSync(t, l)
		exp := t0.Add(time.Hour)
		mustRevoke(t, l, "tok-revoked", exp)
		// alice's cut-off covers tokens expiring up to UserUntil.
		cut := UserUntil(t0, 2*time.Hour)
		mustRevoke(t, l, UserKey("alice"), cut)
		cases := []struct {
			id, subject string
			expires     time.Time
			want        bool
		}{
			{"tok-revoked", "bob", exp, true},
			{"tok-fine", "bob", exp, false},
			{"tok-fine", "alice", exp, true},                   // issued before the cut-off
			{"tok-fine", "alice", cut.Add(time.Minute), false}, // after it
			{"", "", exp, false},
		}
		check := func(stage string) {
			t.Helper()
			for _, c := range cases {
				got, err := l.TokenRevoked(ctx, c.id, c.subject, c.expires)
				if err != nil || got != c.want {
					t.Fatalf("%s: TokenRevoked(%q, %q, %v) = %v, %v; want %v", stage, c.id, c.subject, c.expires, got, err, c.want)
				}
			}
		}
		check("after revoking")
		if e.redis {
			e.flushRedis(t)
			check("with Redis flushed")
		}
	})
}
