package revocation

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/gatehouse-id/gatehouse/pkg/db"
	"github.com/gatehouse-id/gatehouse/pkg/testutil"
	"github.com/gatehouse-id/gatehouse/services/tokens/migrations"
)

// unreachableRedis is a closed port: every Redis call fails at once.
const unreachableRedis = "redis://127.0.0.1:1/0"

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// env is one backend combination: a database (shared by the replicas a
// test builds) and, in Redis mode, a Redis key prefix.
type env struct {
	dialect  db.Dialect
	redis    bool
	dbOpts   db.Options
	store    *db.DB
	clock    *clock
	redisURL string
	rdb      *redis.Client
	prefix   string
	lists    []*List // the replicas built
}

func dbOptions(t testing.TB, d db.Dialect) db.Options {
	t.Helper()
	o := db.Options{Service: "tokens", Migrations: migrations.FS, Logger: slog.New(slog.DiscardHandler)}
	if d == db.Postgres {
		url, prefix := testutil.PostgresSchemaPrefix(t)
		o.URL, o.Service = url, prefix+"tokens"
	} else {
		// Replicas (see replica) open the file once more each.
		o.DataDir, o.Unlocked = t.TempDir(), true
	}
	return o
}

func openDB(t testing.TB, o db.Options) *db.DB {
	t.Helper()
	store, err := db.Open(context.Background(), o)
	if err != nil {
		t.Fatalf("db.Open: %v", err)
	}
	t.Cleanup(func() { _ = store.Close() })
	return store
}

func newEnv(t testing.TB, d db.Dialect, withRedis bool) *env {
	t.Helper()
	e := &env{dialect: d, redis: withRedis, clock: &clock{now: t0}}
	if withRedis {
		e.redisURL = testutil.RedisURL(t)
		e.rdb, e.prefix = testutil.Redis(t)
	}
	e.dbOpts = dbOptions(t, d)
	e.store = openDB(t, e.dbOpts)
	return e
}

// forEachBackend runs f on SQLite and PostgreSQL, each with the list in
// memory and in Redis.
func forEachBackend(t *testing.T, f func(t *testing.T, e *env)) {
	for _, d := range []db.Dialect{db.SQLite, db.Postgres} {
		for _, withRedis := range []bool{false, true} {
			name := string(d) + "/memory"
			if withRedis {
				name = string(d) + "/redis"
			}
			t.Run(name, func(t *testing.T) { f(t, newEnv(t, d, withRedis)) })
		}
	}
}

// forEachDialectWithRedis runs f on SQLite and PostgreSQL with Redis.
func forEachDialectWithRedis(t *testing.T, f func(t *testing.T, e *env)) {
	for _, d := range []db.Dialect{db.SQLite, db.Postgres} {
		t.Run(string(d), func(t *testing.T) { f(t, newEnv(t, d, true)) })
	}
}

// replica builds another List, as another process would: its own
// database handle and Redis client, the same database and prefix.
func (e *env) replica(t testing.TB) *List {
	t.Helper()
	return e.replicaWith(t, e.redisURL, Options{})
}

func (e *env) replicaWith(t testing.TB, redisURL string, o Options) *List {
	t.Helper()
	o.RedisURL, o.Prefix, o.Now = redisURL, e.prefix, e.clock.Now
	o.Logger = slog.New(slog.NewTextHandler(t.Output(), nil))
	l, err := New(openDB(t, e.dbOpts), o)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() {
		if err := l.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	e.lists = append(e.lists, l)
	return l
}

// flushRedis deletes every key under the test's prefix, the marker
// included, and the script cache, as a Redis restart without persistence
// would.
func (e *env) flushRedis(t testing.TB) {
	t.Helper()
	ctx := context.Background()
	iter := e.rdb.Scan(ctx, 0, e.prefix+"*", 1000).Iterator()
	var keys []string
	for iter.Next(ctx) {
		keys = append(keys, iter.Val())
	}
	if err := iter.Err(); err != nil {
		t.Fatalf("scan Redis: %v", err)
	}
	if len(keys) > 0 {
		if err := e.rdb.Del(ctx, keys...).Err(); err != nil {
			t.Fatalf("flush Redis: %v", err)
		}
	}
	if err := e.rdb.ScriptFlush(ctx).Err(); err != nil {
		t.Fatalf("flush Redis scripts: %v", err)
	}
}

func mustRevoke(t testing.TB, l *List, id string, exp time.Time) {
	t.Helper()
	if err := l.Revoke(context.Background(), id, exp); err != nil {
		t.Fatalf("Revoke(%s): %v", id, err)
	}
}

func wantRevoked(t testing.TB, l *List, id string, want bool) {
	t.Helper()
	got, err := l.IsRevoked(context.Background(), id)
	if err != nil {
		t.Fatalf("IsRevoked(%s): %v", id, err)
	}
	if got != want {
		t.Fatalf("IsRevoked(%s) = %v; want %v", id, got, want)
	}
}

func mustSync(t testing.TB, l *List) {
	t.Helper()
	if err := l.Sync(context.Background()); err != nil {
		t.Fatalf("Sync: %v", err)
	}
}

// waitLoaded waits for the background work of every replica (a rebuild
// a check started holds the lock while it runs), then syncs l, after
// which Redis must hold the loaded marker.
func (e *env) waitLoaded(t testing.TB, l *List) {
	t.Helper()
	for _, r := range e.lists {
		r.bg.Wait()
	}
	mustSync(t, l)
	loaded, err := l.redis.markerExists(context.Background())
	if err != nil {
		t.Fatalf("read marker: %v", err)
	}
	if !loaded {
		t.Fatal("Redis list not rebuilt: no loaded marker after the background work and a sync")
	}
}
