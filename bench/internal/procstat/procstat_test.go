package procstat

import (
	"crypto/sha256"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseStat(t *testing.T) {
	// A command name with a space and a ')' must not shift the fields.
	line := "4242 (we ird) proc) S 1 4242 4242 0 -1 4194560 500 0 0 0 731 269 12 3 20 0 9 0 123 0 0\n"
	got, err := parseStat([]byte(line))
	if err != nil {
		t.Fatal(err)
	}
	if want := (stat{comm: "we ird) proc", utime: 731, stime: 269, cutime: 12, cstime: 3}); got != want {
		t.Fatalf("parseStat = %+v; want %+v", got, want)
	}
	for _, bad := range []string{"", "1 (x) S 1 2", "1 (x) S 1 2 3 4 5 6 7 8 9 10 x 5 0 0", "1 (x) S 1 2 3 4 5 6 7 8 9 10 1 5 0"} {
		if _, err := parseStat([]byte(bad)); err == nil {
			t.Errorf("parseStat(%q) succeeded; want an error", bad)
		}
	}
}

// fakeProc writes a /proc-like tree: one stat file per pid.
func fakeProc(t *testing.T, stats map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for pid, line := range stats {
		if err := os.Mkdir(filepath.Join(dir, pid), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, pid, "stat"), []byte(line), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// Not processes: skipped.
	if err := os.WriteFile(filepath.Join(dir, "loadavg"), []byte("0.1 0.2 0.3 1/2 3"), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestByNameSumsProcessesAndReapedChildren: every process of the name
// counts, with its cutime and cstime (where a PostgreSQL backend's CPU goes
// when the postmaster reaps it); other names and a pid that vanished
// between the listing and the read (a directory without stat) do not.
func TestByNameSumsProcessesAndReapedChildren(t *testing.T) {
	const rest = " 0 0 20 0 1 0 100 0 0\n"
	proc := fakeProc(t, map[string]string{
		"100": "100 (postgres) S 1 100 100 0 -1 0 0 0 0 0 50 20 300 100" + rest, // postmaster
		"101": "101 (postgres) S 100 100 100 0 -1 0 0 0 0 0 7 3 0 0" + rest,     // a backend
		"200": "200 (redis-server) S 1 200 200 0 -1 0 0 0 0 0 999 999 0 0" + rest,
		"300": "300 (postgres2) S 1 300 300 0 -1 0 0 0 0 0 999 999 0 0" + rest,
	})
	if err := os.Mkdir(filepath.Join(proc, "400"), 0o755); err != nil {
		t.Fatal(err)
	}
	cpu, n, err := byName(proc, "postgres")
	if err != nil {
		t.Fatal(err)
	}
	if want := ticks(50 + 20 + 300 + 100 + 7 + 3); cpu != want || n != 2 {
		t.Fatalf("byName = %v over %d processes; want %v over 2", cpu, n, want)
	}
	if _, n, err := byName(proc, "nginx"); err != nil || n != 0 {
		t.Fatalf("byName(nginx) = %d processes, %v; want 0, nil", n, err)
	}
}

func TestByNameFindsThisProcess(t *testing.T) {
	b, err := os.ReadFile("/proc/self/comm")
	if err != nil {
		t.Fatal(err)
	}
	if _, n, err := ByName(strings.TrimSpace(string(b))); err != nil || n < 1 {
		t.Fatalf("ByName(own name) found %d processes, %v; want at least this one", n, err)
	}
}

func TestParseRSS(t *testing.T) {
	status := "Name:\tedge\nVmPeak:\t  900000 kB\nVmRSS:\t   51234 kB\nRssAnon:\t 40000 kB\n"
	if got, err := parseRSS([]byte(status)); err != nil || got != 51234*1024 {
		t.Fatalf("parseRSS = %d, %v; want %d", got, err, 51234*1024)
	}
	for _, bad := range []string{"Name:\tkthreadd\n", "VmRSS:\t12 MB\n", "VmRSS:\tx kB\n"} {
		if _, err := parseRSS([]byte(bad)); err == nil {
			t.Errorf("parseRSS(%q) succeeded; want an error", bad)
		}
	}
	if rss, err := RSS(os.Getpid()); err != nil || rss <= 0 {
		t.Fatalf("RSS(self) = %d, %v; want > 0", rss, err)
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
