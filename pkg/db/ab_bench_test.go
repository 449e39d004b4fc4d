package db_test

import (
	"context"
	"log/slog"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/gatehouse-id/gatehouse/pkg/db"
	"github.com/gatehouse-id/gatehouse/pkg/testutil/benchcpu"
)

// BenchmarkABStatementCache is make bench-ab's pair (bench/README,
// "Hand-made machinery") for SQLite's prepared-statement cache: a point
// lookup by primary key, as the hot paths run, with the statement kept
// prepared (ab=hand) and compiled on each query (ab=plain).
func BenchmarkABStatementCache(b *testing.B) {
	for _, arm := range []string{"hand", "plain"} {
		b.Run("ab="+arm, func(b *testing.B) {
			ctx := context.Background()
			d, err := db.Open(ctx, db.Options{DataDir: filepath.Join(b.TempDir(), "data"), Service: "ab",
				Migrations: migrationsV1(), Logger: slog.New(slog.DiscardHandler)})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = d.Close() })
			for i := range 1000 {
				if err := insertItem(ctx, d, int64(i+1), "item-"+strconv.Itoa(i)); err != nil {
					b.Fatal(err)
				}
			}
			if arm == "plain" {
				db.WithoutStatementCache(d)
			}
			b.SetParallelism(8)
			b.ReportAllocs()
			m := benchcpu.Start(b)
			b.RunParallel(func(pb *testing.PB) {
				var it item
				id := int64(0)
				for pb.Next() {
					id = id%1000 + 1
					if err := d.Get(ctx, &it, `SELECT id, name, note, data, created_at, flag FROM items WHERE id = ?`, id); err != nil {
						b.Error(err)
						return
					}
				}
			})
			m.Report(b)
		})
	}
}
