//go:build unix

package benchcpu

import (
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
