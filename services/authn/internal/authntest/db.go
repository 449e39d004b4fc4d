package authntest

import (
	"context"
	"testing"

	"github.com/gatehouse-id/gatehouse/pkg/db"
	"github.com/gatehouse-id/gatehouse/pkg/logging"
	"github.com/gatehouse-id/gatehouse/pkg/testutil"
	"github.com/gatehouse-id/gatehouse/services/authn/migrations"
)

// Dialects lists the backends every storage test runs against.
var Dialects = []db.Dialect{db.SQLite, db.Postgres}

// Options locate a fresh authn database of dialect d, removed after the
// test (PostgreSQL: skipped when unreachable, failed under CI=true), with
// authn's migrations. Opening them twice opens the same database.
func Options(t testing.TB, d db.Dialect) db.Options {
	t.Helper()
	o := db.Options{Service: "authn", Migrations: migrations.FS, Logger: logging.Discard()}
	switch d {
	case db.SQLite:
		o.DataDir = t.TempDir()
	case db.Postgres:
		url, prefix := testutil.PostgresSchemaPrefix(t)
		o.URL, o.Service = url, prefix+"authn"
	}
	return o
}

// Open opens a fresh, migrated authn database of dialect d (see Options),
// closed after the test.
func Open(t testing.TB, d db.Dialect) *db.DB {
	t.Helper()
	return OpenWith(t, Options(t, d))
}

// OpenWith opens and migrates the database of o, closed after the test.
func OpenWith(t testing.TB, o db.Options) *db.DB {
	t.Helper()
	st, err := db.Open(context.Background(), o)
	if err != nil {
		t.Fatalf("open %s: %v", o.Service, err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return st
}

// Run runs f once per dialect as a subtest.
func Run(t *testing.T, f func(t *testing.T, d db.Dialect)) {
	for _, d := range Dialects {
		t.Run(string(d), func(t *testing.T) { f(t, d) })
	}
}
