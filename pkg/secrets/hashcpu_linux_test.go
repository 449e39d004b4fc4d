//go:build linux

package secrets

import (
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// timeOnThread counts all of fn's CPU time, also when fn starts right
// after its goroutine woke up (as a hash does after waiting for a request):
// getrusage(RUSAGE_THREAD), stale until the thread's next tick, came out
// up to a tick short: 64% of 5 ms spins here.
func TestTimeOnThreadCountsAllOfIt(t *testing.T) {
	var onThread, process time.Duration
	for range 30 {
		time.Sleep(time.Millisecond)
		p0 := processCPU(t)
		onThread += timeOnThread(spin)
		process += processCPU(t) - p0
	}
	if onThread < process*95/100 || onThread > process {
		t.Fatalf("timeOnThread counted %v of the %v the process spent spinning; want at least 95%% and at most all of it", onThread, process)
	}
}

// processCPU is the process's CPU time, up to date (CLOCK_PROCESS_CPUTIME_ID).
func processCPU(t *testing.T) time.Duration {
	t.Helper()
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_PROCESS_CPUTIME_ID, &ts); err != nil {
		t.Skipf("no process CPU clock: %v", err)
	}
	return time.Duration(ts.Nano())
}

var spinSink uint64

// spin burns CPU without allocating or entering the kernel, as argon2id
// does (a thread's CPU clock is brought up to date at each system call).
func spin() {
	x := spinSink
	for i := range uint64(4_000_000) {
		x = x*6364136223846793005 + i
	}
	spinSink = x
}
