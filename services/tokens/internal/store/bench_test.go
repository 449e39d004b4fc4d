package store

import (
	"context"
	"crypto/rand"
	"syscall"
	"testing"
	"time"

	"github.com/gatehouse-id/gatehouse/pkg/secrets"
)

// BenchmarkInsertAccessToken is an opaque token's record on SQLite
// (synchronous FULL: a commit per insert, or per group when concurrent);
// cpu-ns/op is the process's CPU per insert, system calls included.
func BenchmarkInsertAccessToken(b *testing.B) {
	for _, par := range []int{1, 4} {
		b.Run(map[int]string{1: "serial", 4: "concurrent-4"}[par], func(b *testing.B) {
			s := openSQLite(b)
			ctx := context.Background()
			b.SetParallelism(par) // × GOMAXPROCS goroutines
			cpu0 := cpuTime()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					a := record(secrets.NewTokenID())
					a.TokenHash = make([]byte, 32)
					_, _ = rand.Read(a.TokenHash)
					if err := s.InsertAccessToken(ctx, nil, a); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.ReportMetric(float64((cpuTime()-cpu0).Nanoseconds())/float64(b.N), "cpu-ns/op")
		})
	}
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
