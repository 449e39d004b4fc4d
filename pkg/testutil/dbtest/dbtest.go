// Package dbtest is the one database harness of every service's tests:
// each dialect (SQLite in a temporary directory, PostgreSQL in schemas of
// the test's own, dropped after it; skipped when PostgreSQL is
// unreachable, failed under CI=true), a service's migrations, dialect
// subtests run in parallel, and Race for "exactly one winner" checks.
package dbtest

import (
	"context"
	"io/fs"
	"sync"
	"testing"

	"github.com/gatehouse-id/gatehouse/pkg/db"
	"github.com/gatehouse-id/gatehouse/pkg/logging"
	"github.com/gatehouse-id/gatehouse/pkg/testutil"
)

// Dialects are the backends every storage test runs against.
var Dialects = []db.Dialect{db.SQLite, db.Postgres}

// Options locate a fresh database of dialect d for service, with its
// migrations, removed after the test. Opening them more than once opens
// the same data (a restart, or several replicas: SQLite's process lock is
// off for that).
func Options(t testing.TB, d db.Dialect, service string, migrations fs.FS) db.Options {
	t.Helper()
	o := db.Options{Service: service, Migrations: migrations, Logger: logging.Discard()}
	switch d {
	case db.SQLite:
		o.DataDir, o.Unlocked = t.TempDir(), true
	case db.Postgres:
		url, prefix := testutil.PostgresSchemaPrefix(t)
		o.URL, o.Service = url, prefix+service
	default:
		t.Fatalf("unknown dialect %q", d)
	}
	return o
}

// Open opens (migrating) a handle on the database of o, closed when the
// test ends.
func Open(t testing.TB, o db.Options) *db.DB {
	t.Helper()
	st, err := db.Open(context.Background(), o)
	if err != nil {
		t.Fatalf("open %s database: %v", o.Service, err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return st
}

// Run runs f once per dialect, as parallel subtests.
func Run(t *testing.T, f func(t *testing.T, d db.Dialect)) {
	t.Helper()
	for _, d := range Dialects {
		t.Run(string(d), func(t *testing.T) {
			t.Parallel()
			f(t, d)
		})
	}
}

// Race runs f n times at once (released together, each with its index)
// and returns how many returned nil, and the other errors: for the checks
// that of concurrent attempts at something single-use exactly one wins.
func Race(n int, f func(i int) error) (wins int, errs []error) {
	var (
		mu    sync.Mutex
		wg    sync.WaitGroup
		start = make(chan struct{})
	)
	for i := range n {
		wg.Go(func() {
			<-start
			err := f(i)
			mu.Lock()
			defer mu.Unlock()
			if err == nil {
				wins++
			} else {
				errs = append(errs, err)
			}
		})
	}
	close(start)
	wg.Wait()
	return wins, errs
}
