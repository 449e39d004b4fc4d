package process

import (
	"context"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/gatehouse-id/gatehouse/pkg/secrets"
)

// The observer counts every check and its CPU time: nearly all the CPU the
// process spent while it hashed (the rest is the runtime's), never more.
func TestHashStats(t *testing.T) {
	if err := hashMetrics(); err != nil {
		t.Fatal(err)
	}
	n0, cpu0 := hashStats()
	var before, after syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &before)
	enc, err := secrets.HashPassword(context.Background(), "pw")
	if err != nil {
		t.Fatal(err)
	}
	if ok, _, err := secrets.VerifyPassword(context.Background(), "pw", enc); !ok || err != nil {
		t.Fatalf("Verify = %v %v", ok, err)
	}
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &after)
	n1, cpu1 := hashStats()
	if n1-n0 != 2 {
		t.Fatalf("HashStats counted %d checks; want 2", n1-n0)
	}
	if runtime.GOOS != "linux" {
		return
	}
	process := time.Duration(after.Utime.Nano() + after.Stime.Nano() - before.Utime.Nano() - before.Stime.Nano())
	if got := cpu1 - cpu0; got < process*7/10 || got > process+10*time.Millisecond {
		t.Fatalf("HashStats CPU %v for two argon2id checks; the process used %v", got, process)
	}
}
