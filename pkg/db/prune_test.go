package db_test

import (
	"context"
	"testing"
	"time"

	"github.com/gatehouse-id/gatehouse/pkg/db"
)

func itemsBefore(table string) db.PruneStep {
	return db.PruneStep{
		Table: table,
		Query: `DELETE FROM items WHERE id IN (SELECT id FROM items WHERE created_at < ? LIMIT ` + db.Batch + `)`,
		Args:  func(now time.Time) []any { return []any{now.Add(-time.Hour)} },
	}
}

func TestPrunerDeletesInBatchesOnlyWhatIsDead(t *testing.T) {
	forEachDialect(t, func(t *testing.T, e env) {
		ctx := context.Background()
		d := e.open(t, "prune", migrationsV1())
		now := time.Now().UTC()
		const dead, live = 2*db.PruneBatch + 17, 40
		err := d.InTx(ctx, func(tx *db.Tx) error {
			for i := range dead + live {
				at := now.Add(-2 * time.Hour)
				if i >= dead {
					at = now
				}
				if _, err := tx.Exec(ctx, `INSERT INTO items (id, name, created_at) VALUES (?, ?, ?)`, i, "n"+time.Duration(i).String(), at); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		p := &db.Pruner{DB: d, Service: e.service("prune"), Steps: []db.PruneStep{itemsBefore("items")}}
		r, err := p.RunOnce(ctx, now)
		if err != nil {
			t.Fatal(err)
		}
		if r.Skipped || r.Deleted["items"] != dead {
			t.Fatalf("round = %+v; want %d items deleted", r, dead)
		}
		if n := count(t, d, `SELECT COUNT(*) FROM items`); n != live {
			t.Fatalf("%d items left; want the %d live ones", n, live)
		}
	})
}

// On PostgreSQL a round holds the service's prune lock: a second replica
// skips its round instead of deleting the same rows concurrently.
func TestPrunerOneReplicaAtATime(t *testing.T) {
	e := newEnv(t, db.Postgres)
	ctx := context.Background()
	a := e.open(t, "prunelock", migrationsV1())
	b := e.open(t, "prunelock", migrationsV1())
	inRound, release := make(chan struct{}), make(chan struct{})
	blocking := db.PruneStep{Table: "items", Query: `DELETE FROM items WHERE id IN (SELECT id FROM items WHERE created_at < ? LIMIT ` + db.Batch + `)`,
		Args: func(now time.Time) []any { close(inRound); <-release; return []any{now} }}
	pa := &db.Pruner{DB: a, Service: e.service("prunelock"), Steps: []db.PruneStep{blocking}}
	pb := &db.Pruner{DB: b, Service: e.service("prunelock"), Steps: []db.PruneStep{itemsBefore("items")}}
	done := make(chan error, 1)
	go func() { _, err := pa.RunOnce(ctx, time.Now()); done <- err }()
	<-inRound
	r, err := pb.RunOnce(ctx, time.Now())
	if err != nil || !r.Skipped {
		t.Fatalf("second replica's round = %+v, %v; want skipped while the first holds the lock", r, err)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if r, err := pb.RunOnce(ctx, time.Now()); err != nil || r.Skipped {
		t.Fatalf("after the first round ended: %+v, %v; want a round", r, err)
	}
}
