//go:build unix

// Package benchcpu reports a benchmark's process CPU per operation
// ("cpu-ns/op") beside its wall time. The interleaved A/B benchmarks of
// make bench-ab compare a hand-made piece with the plain path it replaces
// by this figure: on a shared 2-core machine wall time moves with every
// neighbour, while the CPU a request costs is what limits a replica.
package benchcpu

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Meter holds the process's CPU time when a measurement began.
type Meter struct{ start time.Duration }

// Start resets b's timer and begins measuring: call it after the set-up.
func Start(b *testing.B) Meter {
	b.ResetTimer()
	return Meter{start: cpu()}
}

// Report stops b's timer and reports the CPU spent since Start per
// operation, user and system time of every thread of the process.
func (m Meter) Report(b *testing.B) {
	b.StopTimer()
	if b.N > 0 {
		b.ReportMetric(float64(cpu()-m.start)/float64(b.N), "cpu-ns/op")
	}
}

func cpu() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// Redis reports, when the returned func is called, the CPU Redis spent
// since Redis was called per operation of b ("redis-cpu-ns/op", from INFO
// cpu): Redis is one core shared by every replica, so what a piece saves
// there counts apart from the process's own CPU.
func Redis(b *testing.B, client *redis.Client) (report func()) {
	start, err := redisCPU(client)
	if err != nil {
		b.Fatalf("redis INFO cpu: %v", err)
	}
	return func() {
		end, err := redisCPU(client)
		if err != nil {
			b.Fatalf("redis INFO cpu: %v", err)
		}
		if b.N > 0 {
			b.ReportMetric(float64(end-start)/float64(b.N), "redis-cpu-ns/op")
		}
	}
}

// redisCPU is the server's used_cpu_sys plus used_cpu_user.
func redisCPU(client *redis.Client) (time.Duration, error) {
	info, err := client.Info(context.Background(), "cpu").Result()
	if err != nil {
		return 0, err
	}
	var sum float64
	for line := range strings.Lines(info) {
		name, value, ok := strings.Cut(strings.TrimSpace(line), ":")
		if ok && (name == "used_cpu_sys" || name == "used_cpu_user") {
			v, err := strconv.ParseFloat(value, 64)
			if err != nil {
				return 0, fmt.Errorf("%s: %w", name, err)
			}
			sum += v
		}
	}
	return time.Duration(sum * float64(time.Second)), nil
}

// Processes reports, when the returned func is called, the CPU that every
// process named name on this machine (PostgreSQL's "postgres": its
// backends, WAL writer and checkpointer) spent since Processes was called,
// per operation of b ("name-cpu-ns/op"). Processes that ended in between
// are not counted; other users of the same server are.
func Processes(b *testing.B, name string) (report func()) {
	start := processesCPU(name)
	return func() {
		if b.N > 0 {
			b.ReportMetric(float64(processesCPU(name)-start)/float64(b.N), name+"-cpu-ns/op")
		}
	}
}

// processesCPU sums utime and stime of /proc/<pid>/stat over the processes
// whose comm is name, in clock ticks of 10 ms (USER_HZ is 100 on Linux).
func processesCPU(name string) time.Duration {
	dirs, err := os.ReadDir("/proc")
	if err != nil {
		return 0
	}
	var ticks int64
	for _, d := range dirs {
		if d.Name()[0] < '0' || d.Name()[0] > '9' {
			continue
		}
		raw, err := os.ReadFile("/proc/" + d.Name() + "/stat")
		if err != nil {
			continue
		}
		s := string(raw)
		open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
		if open < 0 || end < open || s[open+1:end] != name {
			continue
		}
		// After "(comm) ": state is field 3; utime and stime are 14 and 15.
		f := strings.Fields(s[end+1:])
		if len(f) < 13 {
			continue
		}
		u, _ := strconv.ParseInt(f[11], 10, 64)
		st, _ := strconv.ParseInt(f[12], 10, 64)
		ticks += u + st
	}
	return time.Duration(ticks) * 10 * time.Millisecond
}
