//go:build linux

package secrets

import (
	"runtime"
	"syscall"
	"time"
)

// rusageThread is Linux's RUSAGE_THREAD: the calling thread's usage alone.
const rusageThread = 1

// timeOnThread runs fn on a thread of its own and returns the CPU time
// the thread spent in it: a hash's own cost, apart from the other work of
// the process and from waiting for a core.
func timeOnThread(fn func()) time.Duration {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var before, after syscall.Rusage
	if syscall.Getrusage(rusageThread, &before) != nil {
		fn()
		return 0
	}
	fn()
	if syscall.Getrusage(rusageThread, &after) != nil {
		return 0
	}
	return cpuTime(after) - cpuTime(before)
}

func cpuTime(r syscall.Rusage) time.Duration {
	return time.Duration(r.Utime.Nano() + r.Stime.Nano())
}
