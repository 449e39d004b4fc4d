package authntest

import (
	"testing"

	"github.com/gatehouse-id/gatehouse/pkg/db"
	"github.com/gatehouse-id/gatehouse/pkg/testutil/dbtest"
	"github.com/gatehouse-id/gatehouse/services/authn/migrations"
)

// Dialects lists the backends every storage test runs against.
var Dialects = dbtest.Dialects

// Options locate a fresh authn database of dialect d (see dbtest.Options),
// with authn's migrations. Opening them twice opens the same database.
func Options(t testing.TB, d db.Dialect) db.Options {
	t.Helper()
	return dbtest.Options(t, d, "authn", migrations.FS)
}

// Open opens a fresh, migrated authn database of dialect d (see Options),
// closed after the test.
func Open(t testing.TB, d db.Dialect) *db.DB {
	t.Helper()
	return dbtest.Open(t, Options(t, d))
}

// OpenWith opens and migrates the database of o, closed after the test.
func OpenWith(t testing.TB, o db.Options) *db.DB {
	t.Helper()
	return dbtest.Open(t, o)
}

// Run runs f once per dialect, as parallel subtests.
func Run(t *testing.T, f func(t *testing.T, d db.Dialect)) { dbtest.Run(t, f) }
