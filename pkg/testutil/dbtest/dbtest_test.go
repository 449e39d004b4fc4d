package dbtest

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"testing/fstest"

	"github.com/gatehouse-id/gatehouse/pkg/db"
)

// Race releases every attempt together and counts the winners.
func TestRace(t *testing.T) {
	t.Parallel()
	var taken atomic.Bool
	wins, errs := Race(16, func(int) error {
		if taken.CompareAndSwap(false, true) {
			return nil
		}
		return errors.New("taken")
	})
	if wins != 1 || len(errs) != 15 {
		t.Fatalf("%d wins, %d errors; want 1 and 15", wins, len(errs))
	}
}

// Every dialect's database opens migrated (with no migrations here) and
// its options reopen the same data.
func TestRunOpensEachDialect(t *testing.T) {
	t.Parallel()
	Run(t, func(t *testing.T, d db.Dialect) {
		o := Options(t, d, "dbtest", fstest.MapFS{"00001_init.sql": {Data: []byte(
			"-- +goose Up\nCREATE TABLE marks (id INTEGER PRIMARY KEY);\n-- +goose Down\nDROP TABLE marks;\n")}})
		st := Open(t, o)
		if _, err := st.Exec(context.Background(), `INSERT INTO marks (id) VALUES (1)`); err != nil {
			t.Fatal(err)
		}
		var n int
		if err := Open(t, o).Get(context.Background(), &n, `SELECT count(*) FROM marks`); err != nil || n != 1 {
			t.Fatalf("reopened: %d rows, %v; want the same data", n, err)
		}
	})
}
