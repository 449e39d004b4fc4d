package db_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/gatehouse-id/gatehouse/pkg/db"
)

// A service's SQLite data has one owner: a second Open of it fails with
// ErrLocked, naming the data directory, until the first is closed. flock
// belongs to the open file, so two opens in one process conflict as two
// processes do (e2e TestSQLiteDataHasOneOwner starts a second process).
// Another service's data in the same directory is not locked by it, and
// PostgreSQL is never locked: its replicas share the database.
func TestSQLiteDataHasOneOwner(t *testing.T) {
	forEachDialect(t, func(t *testing.T, e env) {
		ctx := context.Background()
		first, err := db.Open(ctx, e.options("svc", migrationsV1()))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = first.Close() })
		second, err := db.Open(ctx, e.options("svc", migrationsV1()))
		if e.dialect == db.Postgres {
			if err != nil {
				t.Fatalf("second Open on PostgreSQL: %v; want the replicas to share", err)
			}
			_ = second.Close()
			return
		}
		if err == nil {
			_ = second.Close()
			t.Fatal("second Open of the same SQLite data succeeded; want ErrLocked")
		}
		dir, _ := filepath.Abs(e.dataDir)
		msg := err.Error()
		if !errors.Is(err, db.ErrLocked) || !strings.Contains(msg, "another process holds the svc data in "+dir) ||
			!strings.Contains(msg, filepath.Join(dir, "svc.lock")) || !strings.Contains(msg, "pid "+strconv.Itoa(os.Getpid())) {
			t.Fatalf("second Open: %v; want ErrLocked naming the data directory, the lock file and its holder", err)
		}
		// The refused Open changed nothing: the owner still works.
		if err := insertItem(ctx, first, 1, "owner"); err != nil {
			t.Fatalf("the owner after a refused Open: %v", err)
		}
		other := e.open(t, "other", migrationsV1())
		if err := insertItem(ctx, other, 1, "other service"); err != nil {
			t.Fatal(err)
		}
		unlocked := e.options("svc", migrationsV1())
		unlocked.Unlocked = true
		peek, err := db.Open(ctx, unlocked)
		if err != nil {
			t.Fatalf("Unlocked Open beside the owner: %v", err)
		}
		if got := count(t, peek, `SELECT count(*) FROM items`); got != 1 {
			t.Errorf("the unlocked handle sees %d items; want the owner's 1", got)
		}
		_ = peek.Close()
		// Closing releases the lock.
		if err := first.Close(); err != nil {
			t.Fatal(err)
		}
		again := e.open(t, "svc", migrationsV1())
		if got := count(t, again, `SELECT count(*) FROM items`); got != 1 {
			t.Errorf("after reopening: %d items; want 1", got)
		}
	})
}
