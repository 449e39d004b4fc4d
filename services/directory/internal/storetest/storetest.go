// Package storetest opens the directory's database for tests on every
// dialect: SQLite in a temporary directory and PostgreSQL in a schema of its
// own (skipped when PostgreSQL is unreachable, failed under CI=true).
package storetest

import (
	"context"
	"testing"

	"github.com/gatehouse-id/gatehouse/pkg/db"
	"github.com/gatehouse-id/gatehouse/pkg/logging"
	"github.com/gatehouse-id/gatehouse/pkg/testutil"
	"github.com/gatehouse-id/gatehouse/services/directory/migrations"
)

// Dialects lists the backends every storage test runs against.
var Dialects = []db.Dialect{db.SQLite, db.Postgres}

// Options returns db.Options for a fresh, migrated directory database of
// dialect d that is removed after the test. Reopening with the same options
// reaches the same data (restart tests).
func Options(t testing.TB, d db.Dialect) db.Options {
	t.Helper()
	o := db.Options{Service: "directory", Migrations: migrations.FS, Logger: logging.Discard()}
	switch d {
	case db.SQLite:
		o.DataDir = t.TempDir()
	case db.Postgres:
		url, prefix := testutil.PostgresSchemaPrefix(t)
		o.URL = url
		o.Service = prefix + "directory"
	}
	return o
}

// Open opens a fresh, migrated directory database of dialect d.
func Open(t testing.TB, d db.Dialect) *db.DB {
	t.Helper()
	st, err := db.Open(context.Background(), Options(t, d))
	if err != nil {
		t.Fatalf("open %s: %v", d, err)
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
