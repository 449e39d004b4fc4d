// Package keytest supports tests of the signing keys and of the handlers
// built on them: isolated tokens databases on SQLite and PostgreSQL (real
// ones, through pkg/testutil), a settable clock, and managers wired to
// both.
package keytest

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/gatehouse-id/gatehouse/pkg/db"
	"github.com/gatehouse-id/gatehouse/pkg/testutil"
	"github.com/gatehouse-id/gatehouse/services/tokens/internal/keys"
	"github.com/gatehouse-id/gatehouse/services/tokens/migrations"
)

// Dialects are the backends every storage test runs on.
var Dialects = []db.Dialect{db.SQLite, db.Postgres}

// MasterKey is the tests' master key.
var MasterKey = bytes.Repeat([]byte{7}, 32)

// Quiet discards log output.
var Quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// DBOptions returns options for a fresh, empty tokens database on d;
// opening them more than once gives several handles on the same data, as
// replicas have. PostgreSQL tests skip when it is unreachable (fail under
// CI=true).
func DBOptions(t testing.TB, d db.Dialect) db.Options {
	t.Helper()
	o := db.Options{Service: "tokens", Migrations: migrations.FS, Logger: Quiet}
	switch d {
	case db.SQLite:
		o.DataDir, o.Unlocked = t.TempDir(), true // opened more than once (above)
	case db.Postgres:
		url, prefix := testutil.PostgresSchemaPrefix(t)
		o.URL, o.Service = url, prefix+"tokens"
	default:
		t.Fatalf("unknown dialect %q", d)
	}
	return o
}

// Open opens (migrating) a handle on the database of o, closed when the
// test ends.
func Open(t testing.TB, o db.Options) *db.DB {
	t.Helper()
	store, err := db.Open(context.Background(), o)
	if err != nil {
		t.Fatalf("open tokens database: %v", err)
	}
	t.Cleanup(func() { _ = store.Close() })
	return store
}

// Clock is a settable clock, safe for concurrent use.
type Clock struct {
	mu sync.Mutex
	t  time.Time
}

// NewClock returns a clock reading t.
func NewClock(t time.Time) *Clock { return &Clock{t: t} }

// Now reads the clock.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Advance moves the clock forward by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// Set moves the clock to t.
func (c *Clock) Set(t time.Time) {
	c.mu.Lock()
	c.t = t
	c.mu.Unlock()
}

// Options returns manager options for tests: algorithm alg, rotation every
// 10 minutes, tokens living 30 minutes, the package defaults otherwise,
// reading clock (if not nil).
func Options(alg string, clock *Clock) keys.Options {
	o := keys.Options{
		Algorithm:        alg,
		RotationInterval: 10 * time.Minute,
		MaxTokenLifetime: 30 * time.Minute,
		MasterKey:        MasterKey,
		Logger:           Quiet,
	}
	if clock != nil {
		o.Now = clock.Now
	}
	return o
}

// Manager returns a manager on store with o.
func Manager(t testing.TB, store *db.DB, o keys.Options) *keys.Manager {
	t.Helper()
	m, err := keys.New(context.Background(), store, o)
	if err != nil {
		t.Fatalf("keys.New: %v", err)
	}
	t.Cleanup(m.Stop)
	return m
}
