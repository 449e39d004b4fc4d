package procstat

import (
	"crypto/sha256"
	"os"
	"testing"
)

func TestParseStat(t *testing.T) {
	// A command name with a space and a ')' must not shift the fields.
	line := "4242 (we ird) proc) S 1 4242 4242 0 -1 4194560 500 0 0 0 731 269 0 0 20 0 9 0 123 0 0\n"
	got, err := parseStat([]byte(line))
	if err != nil {
		t.Fatal(err)
	}
	if got != 731+269 {
		t.Fatalf("parseStat = %d; want %d", got, 731+269)
	}
	for _, bad := range []string{"", "1 (x) S 1 2", "1 (x) S 1 2 3 4 5 6 7 8 9 10 x 5"} {
		if _, err := parseStat([]byte(bad)); err == nil {
			t.Errorf("parseStat(%q) succeeded; want an error", bad)
		}
	}
}

func TestClockTicksMatchesUserHZ(t *testing.T) {
	// USER_HZ is 100 on every Linux architecture Go supports; the auxv read
	// must find the same value the kernel hands to sysconf.
	if got := ClockTicks(); got != 100 {
		t.Fatalf("ClockTicks() = %d; want 100", got)
	}
	if v, ok := auxv(atClkTck); !ok || v != 100 {
		t.Fatalf("auxv(AT_CLKTCK) = %d, %v; want 100, true", v, ok)
	}
}

func TestCPUTimeGrowsWithWork(t *testing.T) {
	before, err := CPUTime(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	// Burn CPU until the counter moves; the loop is bounded by work, not by
	// a clock, and a counter that never moves fails the test.
	sum := sha256.Sum256([]byte("seed"))
	for i := 0; i < 1<<26; i++ {
		sum = sha256.Sum256(sum[:])
		if i%4096 == 0 {
			now, err := CPUTime(os.Getpid())
			if err != nil {
				t.Fatal(err)
			}
			if now > before {
				return
			}
		}
	}
	t.Fatalf("CPU time of this process stayed at %v after 2^26 hashes", before)
}

func TestCPUTimeUnknownPid(t *testing.T) {
	if _, err := CPUTime(-1); err == nil {
		t.Fatal("CPUTime(-1) succeeded; want an error")
	}
}
