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
	"github.com/gatehouse-id/gatehouse/pkg/testutil/dbtest"
	"github.com/gatehouse-id/gatehouse/services/tokens/internal/keys"
	"github.com/gatehouse-id/gatehouse/services/tokens/migrations"
)

// Dialects are the backends every storage test runs on.
var Dialects = dbtest.Dialects

// MasterKey is the tests' master key.
var MasterKey = bytes.Repeat([]byte{7}, 32)

// Quiet discards log output.
var Quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// DBOptions returns options for a fresh, empty tokens database on d;
// opening them more than once gives several handles on the same data, as
// replicas have (see dbtest.Options).
func DBOptions(t testing.TB, d db.Dialect) db.Options {
	t.Helper()
	o := dbtest.Options(t, d, "tokens", migrations.FS)
	o.Logger = Quiet
	return o
}

// Open opens (migrating) a handle on the database of o, closed when the
// test ends.
func Open(t testing.TB, o db.Options) *db.DB {
	t.Helper()
	return dbtest.Open(t, o)
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
