package store

import (
	"context"
	"crypto/rand"
	"fmt"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/gatehouse-id/gatehouse/pkg/db"
	"github.com/gatehouse-id/gatehouse/pkg/logging"
	"github.com/gatehouse-id/gatehouse/pkg/secrets"
	"github.com/gatehouse-id/gatehouse/pkg/testutil"
	"github.com/gatehouse-id/gatehouse/services/tokens/migrations"
)

// BenchmarkInsertAccessToken is an opaque token's record, committed on its
// own (ungrouped) or in a group with concurrent ones (grouped, what
// InsertAccessToken does), on SQLite (synchronous FULL) and PostgreSQL
// (fsync on): cpu-ns/op is this process's CPU per insert, system calls
// included; the database server's own CPU per commit comes on top on
// PostgreSQL. ns/op at concurrency shows the commits saved.
func BenchmarkInsertAccessToken(b *testing.B) {
	stores := map[string]func(testing.TB) *Store{"sqlite": openSQLite, "postgres": openPostgres}
	for _, backend := range []string{"sqlite", "postgres"} {
		for _, grouped := range []bool{true, false} {
			for _, par := range []int{1, 8} {
				name := fmt.Sprintf("%s/%s/concurrency-%d", backend, map[bool]string{true: "grouped", false: "ungrouped"}[grouped], par*runtime.GOMAXPROCS(0))
				b.Run(name, func(b *testing.B) {
					s := stores[backend](b)
					ctx := context.Background()
					b.SetParallelism(par) // × GOMAXPROCS goroutines
					cpu0 := cpuTime()
					b.RunParallel(func(pb *testing.PB) {
						for pb.Next() {
							a := record(secrets.NewTokenID())
							a.TokenHash = make([]byte, 32)
							_, _ = rand.Read(a.TokenHash)
							var err error
							if grouped {
								err = s.InsertAccessToken(ctx, nil, a)
							} else {
								err = insertAccessToken(ctx, s.DB, a)
							}
							if err != nil {
								b.Error(err)
								return
							}
						}
					})
					b.ReportMetric(float64((cpuTime()-cpu0).Nanoseconds())/float64(b.N), "cpu-ns/op")
				})
			}
		}
	}
}

func openPostgres(tb testing.TB) *Store {
	tb.Helper()
	url, prefix := testutil.PostgresSchemaPrefix(tb)
	d, err := db.Open(context.Background(), db.Options{URL: url, Service: prefix + "tokens",
		Migrations: migrations.FS, Logger: logging.Discard()})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = d.Close() })
	return &Store{DB: d}
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
