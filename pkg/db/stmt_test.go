package db_test

import (
	"context"
	"testing"

	"github.com/gatehouse-id/gatehouse/pkg/db"
)

// SQLite statements are prepared once per query text and reused, inside
// transactions too, and survive schema changes.
func TestSQLiteStatementCache(t *testing.T) {
	t.Parallel()
	e := newEnv(t, db.SQLite)
	d := e.open(t, "stmts", migrationsV1())
	ctx := context.Background()
	base := db.CachedStatements(d) // none: migrations run before the cache exists
	for i := range 3 {
		if err := insertItem(ctx, d, int64(i+1), "n"+string(rune('a'+i))); err != nil {
			t.Fatal(err)
		}
		if n := count(t, d, `SELECT count(*) FROM items WHERE id <= ?`, i+1); n != i+1 {
			t.Fatalf("count = %d; want %d", n, i+1)
		}
	}
	if got := db.CachedStatements(d) - base; got != 2 {
		t.Fatalf("cached statements = %d; want 2 (the insert and the count)", got)
	}

	// In a transaction an uncached query runs unprepared, then is prepared
	// in the background; a cached one is used through the transaction.
	const inTx = `SELECT count(*) FROM items WHERE name <> ?`
	for range 2 {
		err := d.InTx(ctx, func(tx *db.Tx) error {
			if n := count(t, tx, inTx, "tx"); n != 3 {
				t.Fatalf("in tx: count = %d; want 3", n)
			}
			return insertItemOnce(ctx, tx)
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	db.WaitPrepared(d)
	if got := db.CachedStatements(d) - base; got != 4 {
		t.Fatalf("cached statements = %d; want the transaction's two as well", got)
	}

	// Cached statements keep working across a schema change (SQLite
	// re-prepares them), and new ones see the new column.
	var name string
	if err := d.Get(ctx, &name, `SELECT name FROM items WHERE id = ?`, 1); err != nil || name != "na" {
		t.Fatalf("get = %q, %v", name, err)
	}
	if _, err := d.Exec(ctx, `ALTER TABLE items ADD COLUMN extra TEXT DEFAULT 'new'`); err != nil {
		t.Fatal(err)
	}
	var extra string
	if err := d.Get(ctx, &extra, `SELECT extra FROM items WHERE id = ?`, 1); err != nil || extra != "new" {
		t.Fatalf("after ALTER: %q, %v", extra, err)
	}
	if err := d.Get(ctx, &name, `SELECT name FROM items WHERE id = ?`, 1); err != nil || name != "na" {
		t.Fatalf("cached statement after ALTER: %q, %v", name, err)
	}
}

// insertItemOnce adds item 100 unless it is there.
func insertItemOnce(ctx context.Context, q db.Querier) error {
	_, err := q.Exec(ctx, `INSERT INTO items (id, name) VALUES (100, 'tx') ON CONFLICT (id) DO NOTHING`)
	return err
}
