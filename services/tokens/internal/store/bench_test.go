package store

import (
	"context"
	"crypto/rand"
	"testing"

	"github.com/gatehouse-id/gatehouse/pkg/db"
	"github.com/gatehouse-id/gatehouse/pkg/logging"
	"github.com/gatehouse-id/gatehouse/pkg/secrets"
	"github.com/gatehouse-id/gatehouse/pkg/testutil"
	"github.com/gatehouse-id/gatehouse/pkg/testutil/benchcpu"
	"github.com/gatehouse-id/gatehouse/services/tokens/migrations"
)

// BenchmarkABGroupCommit is an A/B benchmark of make bench-ab (bench/README,
// "Hand-made machinery"): an opaque token's record inserted on its own by
// 16 concurrent callers (make bench's concurrency on 2 cores), committed in
// groups (ab=hand: see group) or one insert transaction per record
// (ab=plain), both through db.DB.Relaxed as InsertAccessToken commits them,
// on SQLite and PostgreSQL (fsync on). On PostgreSQL this pair alone
// misleads: with nothing else to do, the gathering costs this process more
// than PostgreSQL saves, while in make bench's distributed token-opaque
// PostgreSQL's CPU per token doubled without it (bench/README). cpu-ns/op is this
// process's CPU per insert, postgres-cpu-ns/op PostgreSQL's own (all its
// processes on this machine), and ns/op shows the commits saved.
func BenchmarkABGroupCommit(b *testing.B) {
	stores := map[string]func(testing.TB) *Store{"sqlite": openSQLite, "postgres": openPostgres}
	for _, backend := range []string{"sqlite", "postgres"} {
		for _, arm := range []string{"hand", "plain"} {
			b.Run(backend+"/ab="+arm, func(b *testing.B) {
				s := stores[backend](b)
				ctx := context.Background()
				relaxed := s.DB.Relaxed()
				insert := func(a *AccessToken) error { return s.group.insert(ctx, relaxed, a) }
				if arm == "plain" {
					insert = func(a *AccessToken) error { return insertAccessToken(ctx, relaxed, a) }
				}
				b.SetParallelism(8) // × GOMAXPROCS (2) = 16 callers
				b.ReportAllocs()
				server := func() {}
				if backend == "postgres" {
					server = benchcpu.Processes(b, "postgres")
				}
				m := benchcpu.Start(b)
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						a := record(secrets.NewTokenID())
						a.TokenHash = make([]byte, 32)
						_, _ = rand.Read(a.TokenHash)
						if err := insert(a); err != nil {
							b.Error(err)
							return
						}
					}
				})
				m.Report(b)
				server()
			})
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
