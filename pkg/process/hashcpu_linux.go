//go:build linux

package process

import (
	"runtime"
	"time"

	"golang.org/x/sys/unix"
)

// timeOnThread runs fn on a thread of its own and returns the CPU time
// the thread spent in it: a hash's own cost, apart from the other work of
// the process and from waiting for a core.
//
// The clock is CLOCK_THREAD_CPUTIME_ID, which the kernel brings up to date
// when read. getrusage(RUSAGE_THREAD) is not: it returns the running
// thread's time as of its last tick, switch or system call, and argon2id
// makes none, so each hash came out short by up to a tick (1.7 ms of a
// login's 24 ms hash, counted as the rest of the login instead).
func timeOnThread(fn func()) time.Duration {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	before, ok := threadCPU()
	fn()
	if !ok {
		return 0
	}
	after, ok := threadCPU()
	if !ok {
		return 0
	}
	return after - before
}

func threadCPU() (time.Duration, bool) {
	var ts unix.Timespec
	if unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts) != nil {
		return 0, false
	}
	return time.Duration(ts.Nano()), true
}
