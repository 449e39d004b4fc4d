package process

import (
	"math"
	"runtime/debug"
	"testing"

	"github.com/KimMachineGun/automemlimit/memlimit"
)

// The container's limit becomes the heap's soft limit, below it; no limit
// leaves none; an operator's GOMEMLIMIT wins; GOGC is left alone. Not
// parallel: the limit is the process's.
func TestTuneGCFollowsTheContainerLimit(t *testing.T) {
	prevLimit, prevPercent := debug.SetMemoryLimit(-1), debug.SetGCPercent(150)
	t.Cleanup(func() {
		debug.SetMemoryLimit(prevLimit)
		debug.SetGCPercent(prevPercent)
	})
	gib := uint64(1 << 30)
	want := int64(float64(gib) * memoryLimitShare)
	if got := tuneGC(memlimit.Limit(gib)); got != want {
		t.Fatalf("memory limit set = %d; want 90%% of 1 GiB", got)
	}
	if got := debug.SetMemoryLimit(-1); got != want {
		t.Fatalf("runtime memory limit = %d; want 90%% of 1 GiB", got)
	}
	if got := debug.SetGCPercent(-1); got != 150 {
		t.Fatalf("GC percent = %d; want what GOGC made it (150): tuneGC leaves it", got)
	}

	noLimit := func() (uint64, error) { return 0, memlimit.ErrNoLimit }
	if got := tuneGC(noLimit); got != math.MaxInt64 {
		t.Fatalf("without a container limit: limit %d; want none (MaxInt64)", got)
	}

	debug.SetMemoryLimit(123 << 20)
	t.Setenv("GOMEMLIMIT", "123MiB")
	if got := tuneGC(memlimit.Limit(gib)); got != 123<<20 {
		t.Fatalf("with GOMEMLIMIT set: limit %d; want the operator's 123 MiB", got)
	}
}
