package process

import (
	"context"
	"testing"

	"github.com/gatehouse-id/gatehouse/pkg/secrets"
	"github.com/gatehouse-id/gatehouse/pkg/testutil/benchcpu"
)

// BenchmarkABHashClock is make bench-ab's pair (bench/README, "Hand-made
// machinery") for the per-hash thread CPU clock behind
// gatehouse_password_hash_cpu_seconds_total: a password check timed on a
// locked thread by CLOCK_THREAD_CPUTIME_ID (ab=hand) and run bare
// (ab=plain). It is measurement, not speed: the pair shows its cost.
func BenchmarkABHashClock(b *testing.B) {
	ctx := context.Background()
	encoded, err := secrets.HashPassword(ctx, "correct horse battery staple")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { secrets.SetObserver(func(fn func()) { fn() }) })
	for _, arm := range []string{"hand", "plain"} {
		b.Run("ab="+arm, func(b *testing.B) {
			if arm == "hand" {
				secrets.SetObserver(func(fn func()) { _ = timeOnThread(fn) })
			} else {
				secrets.SetObserver(func(fn func()) { fn() })
			}
			b.SetParallelism(1)
			b.ReportAllocs()
			m := benchcpu.Start(b)
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if ok, _, err := secrets.VerifyPassword(ctx, "correct horse battery staple", encoded); !ok || err != nil {
						b.Errorf("VerifyPassword: %v, %v", ok, err)
						return
					}
				}
			})
			m.Report(b)
		})
	}
}
