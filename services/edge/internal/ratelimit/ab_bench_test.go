package ratelimit

import (
	"context"
	"testing"

	"github.com/gatehouse-id/gatehouse/pkg/logging"
	"github.com/gatehouse-id/gatehouse/pkg/testutil"
	"github.com/gatehouse-id/gatehouse/pkg/testutil/benchcpu"
)

// BenchmarkABLeases is make bench-ab's pair (bench/README, "Hand-made
// machinery") for the lease layer over Redis's GCRA: one busy key (a
// client hammering the token endpoint within its budget) decided with
// leases (ab=hand) and with a round trip per request (ab=plain: leases of
// one permit, which is what a burst under 20 gets).
func BenchmarkABLeases(b *testing.B) {
	for _, arm := range []string{"hand", "plain"} {
		b.Run("ab="+arm, func(b *testing.B) {
			client, prefix := testutil.Redis(b)
			r, err := NewRedis(client, prefix, 1_000_000, 1_000_000, logging.Discard())
			if err != nil {
				b.Fatal(err)
			}
			if arm == "plain" {
				r.leases.max = 1
			}
			ctx := context.Background()
			b.SetParallelism(8)
			b.ReportAllocs()
			redisCPU := benchcpu.Redis(b, client)
			m := benchcpu.Start(b)
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if d, err := r.Allow(ctx, "client:busy"); err != nil || !d.Allowed {
						b.Errorf("Allow: %+v, %v", d, err)
						return
					}
				}
			})
			m.Report(b)
			redisCPU()
		})
	}
}
