package secrets

import (
	"runtime"
	"testing"

	"golang.org/x/crypto/argon2"

	"github.com/gatehouse-id/gatehouse/pkg/testutil/benchcpu"
)

// BenchmarkABArgon2Memory is make bench-ab's pair (bench/README,
// "Hand-made machinery") for argon2id in reused memory mapped outside the
// Go heap (the internal fork's IDKeyIn, ab=hand) against
// golang.org/x/crypto/argon2.IDKey, which allocates its 19 MiB on the heap
// for every check (ab=plain). Two checks run at once, as HashConcurrency
// allows on two cores, beside 16 MB of live pointer-holding data such as a
// server keeps, which every collection marks. gc/op (collections per check) and
// B/op show what the heap pays.
func BenchmarkABArgon2Memory(b *testing.B) {
	live := make([]*[16]int64, 1<<17) // 16 MB in 131,072 objects
	for i := range live {
		live[i] = new([16]int64)
	}
	password, salt := []byte("correct horse battery staple"), []byte("0123456789abcdef")
	for _, arm := range []string{"hand", "plain"} {
		b.Run("ab="+arm, func(b *testing.B) {
			runtime.GC()
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			b.SetParallelism(1) // GOMAXPROCS checks at once
			b.ReportAllocs()
			m := benchcpu.Start(b)
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if arm == "hand" {
						idKey(password, salt, argonTime, argonMemory, argonThreads, argonKeyLen)
					} else {
						argon2.IDKey(password, salt, argonTime, argonMemory, argonThreads, argonKeyLen)
					}
				}
			})
			m.Report(b)
			runtime.ReadMemStats(&after)
			b.ReportMetric(float64(after.NumGC-before.NumGC)/float64(b.N), "gc/op")
		})
	}
	runtime.KeepAlive(live)
}
