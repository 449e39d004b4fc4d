//go:build unix

package benchcpu

import (
	"os"
	"strings"
	"testing"
	"time"
)

// Busy work shows as CPU; a sleep does not.
func TestMeterCountsCPUNotWaiting(t *testing.T) {
	busy := testing.Benchmark(func(b *testing.B) {
		m := Start(b)
		for range b.N {
			end := time.Now().Add(time.Millisecond)
			for time.Now().Before(end) {
			}
		}
		m.Report(b)
	})
	idle := testing.Benchmark(func(b *testing.B) {
		m := Start(b)
		for range b.N {
			time.Sleep(time.Millisecond)
		}
		m.Report(b)
	})
	if got := busy.Extra["cpu-ns/op"]; got < 0.5e6 {
		t.Fatalf("busy millisecond: %.0f cpu-ns/op; want about 1e6", got)
	}
	if got := idle.Extra["cpu-ns/op"]; got > 0.3e6 {
		t.Fatalf("sleeping millisecond: %.0f cpu-ns/op; want far less than 1e6", got)
	}
}

// This test process's own CPU shows under its name.
func TestProcessesCountsNamedProcesses(t *testing.T) {
	raw, err := os.ReadFile("/proc/self/comm")
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	name := strings.TrimSpace(string(raw))
	before := processesCPU(name)
	end := time.Now().Add(100 * time.Millisecond)
	for time.Now().Before(end) {
	}
	if got := processesCPU(name) - before; got < 50*time.Millisecond {
		t.Fatalf("%s spent %v after 100 ms of busy work; want most of it", name, got)
	}
	if got := processesCPU("no-such-process-name"); got != 0 {
		t.Fatalf("no such process: %v", got)
	}
}
