package revocation

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/gatehouse-id/gatehouse/pkg/db"
	"github.com/gatehouse-id/gatehouse/pkg/testutil/benchcpu"
)

// BenchmarkABRevocationBatch is make bench-ab's pair (bench/README,
// "Hand-made machinery") for the shared Redis round trip of revocation
// checks: 16 concurrent checks of active tokens, each reading what
// TokenRevoked reads (the token's id, its user's cut-off and the loaded
// marker), through the batcher (ab=hand: batcher.get, one MGET shared by
// the checks that arrive together) or in one MGET of their own (ab=plain:
// the batcher's mget, the go-redis call the batcher makes for a round).
// Both arms use the list's client and its pool; the check around the read
// (redisList.lookup, redisRevoked) is the same in both and left out.
// redis-cpu-ns/op is Redis's CPU per check, what the batcher saves on the
// one Redis every replica shares (other users of that Redis count in it).
func BenchmarkABRevocationBatch(b *testing.B) {
	for _, arm := range []string{"hand", "plain"} {
		b.Run("ab="+arm, func(b *testing.B) {
			l := benchList(b, db.SQLite, benchRedis)
			r := l.redis
			get := r.batch.get
			if arm == "plain" {
				get = r.batch.mget
			}
			ctx := context.Background()
			if vals, err := get(ctx, []string{r.prefix + "id-7", r.marker}); err != nil || len(vals) != 2 || vals[0] == nil || vals[1] == nil {
				b.Fatalf("read of a revoked id and the marker: %v, %v; want both set", vals, err)
			}
			var goroutines atomic.Int64
			b.SetParallelism(8) // × GOMAXPROCS (2) = 16 concurrent checks
			b.ReportAllocs()
			redisCPU := benchcpu.Redis(b, r.rdb)
			m := benchcpu.Start(b)
			b.RunParallel(func(pb *testing.PB) {
				g := strconv.FormatInt(goroutines.Add(1), 10)
				keys := []string{r.prefix + "active-" + g, r.prefix + UserKey("user-"+g), r.marker}
				for pb.Next() {
					vals, err := get(ctx, keys)
					if err != nil || len(vals) != 3 || vals[0] != nil || vals[1] != nil || vals[2] == nil {
						b.Errorf("read of an active token: %v, %v; want no entries and the marker", vals, err)
						return
					}
				}
			})
			m.Report(b)
			redisCPU()
		})
	}
}
