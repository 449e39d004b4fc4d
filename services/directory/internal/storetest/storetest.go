// Package storetest opens the directory's database for tests on every
// dialect: SQLite in a temporary directory and PostgreSQL in a schema of its
// own (skipped when PostgreSQL is unreachable, failed under CI=true).
package storetest

import (
	"testing"

	"github.com/gatehouse-id/gatehouse/pkg/db"
	"github.com/gatehouse-id/gatehouse/pkg/testutil/dbtest"
	"github.com/gatehouse-id/gatehouse/services/directory/migrations"
)

// Dialects lists the backends every storage test runs against.
var Dialects = dbtest.Dialects

// Options returns db.Options for a fresh, migrated directory database of
// dialect d that is removed after the test. Reopening with the same options
// reaches the same data (restart tests).
func Options(t testing.TB, d db.Dialect) db.Options {
	t.Helper()
	return dbtest.Options(t, d, "directory", migrations.FS)
}

// Open opens a fresh, migrated directory database of dialect d.
func Open(t testing.TB, d db.Dialect) *db.DB {
	t.Helper()
	return dbtest.Open(t, Options(t, d))
}

// Run runs f once per dialect, as parallel subtests.
func Run(t *testing.T, f func(t *testing.T, d db.Dialect)) { dbtest.Run(t, f) }
