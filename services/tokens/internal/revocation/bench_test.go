package revocation

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/gatehouse-id/gatehouse/pkg/db"
)

type benchMode int

const (
	benchMemory    benchMode = iota // in-process list
	benchRedis                      // Redis list, marker loaded
	benchRedisDown                  // Redis unreachable: every check reads the table
)

// benchList builds a list with 1000 revocations ("id-0" …) in its steady
// state (Redis marker written, or memory copy complete).
func benchList(b *testing.B, d db.Dialect, mode benchMode) *List {
	b.Helper()
	e := newEnv(b, d, mode == benchRedis)
	url := e.redisURL
	if mode == benchRedisDown {
		url = unreachableRedis
	}
	l := e.replicaWith(b, url, Options{})
	ids := make([]string, 1000)
	exps := make([]time.Time, len(ids))
	for i := range ids {
		ids[i], exps[i] = "id-"+strconv.Itoa(i), t0.Add(time.Hour)
	}
	if err := l.RevokeMany(context.Background(), ids, exps); err != nil {
		b.Fatal(err)
	}
	if err := l.Sync(context.Background()); err != nil && mode != benchRedisDown {
		b.Fatal(err)
	}
	return l
}

// BenchmarkIsRevoked measures the check introspection and userinfo make
// on every request: hit = a revoked token, miss = an active one (the
// common case).
func BenchmarkIsRevoked(b *testing.B) {
	ctx := context.Background()
	cases := []struct {
		name    string
		dialect db.Dialect
		mode    benchMode
	}{
		{"memory", db.SQLite, benchMemory},
		{"redis", db.SQLite, benchRedis},
		{"db-fallback/sqlite", db.SQLite, benchRedisDown},
		{"db-fallback/postgres", db.Postgres, benchRedisDown},
	}
	for _, c := range cases {
		for _, hit := range []bool{true, false} {
			id, name := "active", c.name+"/miss"
			if hit {
				id, name = "id-7", c.name+"/hit"
			}
			b.Run(name, func(b *testing.B) {
				l := benchList(b, c.dialect, c.mode)
				for b.Loop() {
					got, err := l.IsRevoked(ctx, id)
					if err != nil || got != hit {
						b.Fatalf("IsRevoked(%s) = %v, %v; want %v", id, got, err, hit)
					}
				}
			})
		}
	}
}

// BenchmarkIsRevokedParallel: misses under concurrent requests.
func BenchmarkIsRevokedParallel(b *testing.B) {
	for _, c := range []struct {
		name string
		mode benchMode
	}{{"memory", benchMemory}, {"redis", benchRedis}} {
		b.Run(c.name+"/miss", func(b *testing.B) {
			l := benchList(b, db.SQLite, c.mode)
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if got, err := l.IsRevoked(context.Background(), "active"); err != nil || got {
						b.Errorf("IsRevoked = %v, %v; want false", got, err)
						return
					}
				}
			})
		})
	}
}

// BenchmarkRevoke measures one revocation: the database write and the push.
func BenchmarkRevoke(b *testing.B) {
	for _, c := range []struct {
		name    string
		dialect db.Dialect
		mode    benchMode
	}{
		{"sqlite/memory", db.SQLite, benchMemory},
		{"sqlite/redis", db.SQLite, benchRedis},
		{"postgres/redis", db.Postgres, benchRedis},
	} {
		b.Run(c.name, func(b *testing.B) {
			l := benchList(b, c.dialect, c.mode)
			i := 0
			for b.Loop() {
				i++
				mustRevoke(b, l, "new-"+strconv.Itoa(i), t0.Add(time.Hour))
			}
		})
	}
}
