package procstat

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// atClkTck is the auxiliary-vector entry that carries USER_HZ; glibc's
// sysconf(_SC_CLK_TCK) answers from it, and so does this package without cgo.
const atClkTck = 17

// fallbackHz is USER_HZ on every Linux architecture Go supports.
const fallbackHz = 100

var (
	hzOnce sync.Once
	hz     int64
)

// ClockTicks returns the number of clock ticks per second in which
// /proc/<pid>/stat reports CPU times.
func ClockTicks() int64 {
	hzOnce.Do(func() {
		hz = fallbackHz
		if v, ok := auxv(atClkTck); ok && v > 0 {
			hz = int64(v)
		}
	})
	return hz
}

// Resolution is the smallest CPU-time step one read of CPUTime can show.
func Resolution() time.Duration { return time.Second / time.Duration(ClockTicks()) }

// auxv looks up one entry of this process's auxiliary vector, which holds
// native-endian machine words in (type, value) pairs.
func auxv(key uint64) (uint64, bool) {
	b, err := os.ReadFile("/proc/self/auxv")
	if err != nil {
		return 0, false
	}
	for ; len(b) >= 16; b = b[16:] {
		k, v := binary.NativeEndian.Uint64(b), binary.NativeEndian.Uint64(b[8:])
		if k == key {
			return v, true
		}
		if k == 0 { // AT_NULL ends the vector
			break
		}
	}
	return 0, false
}

// CPUTime returns the user plus system CPU time process pid has used,
// including that of its exited threads.
func CPUTime(pid int) (time.Duration, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, fmt.Errorf("read cpu time of pid %d: %w", pid, err)
	}
	st, err := parseStat(b)
	if err != nil {
		return 0, fmt.Errorf("pid %d: %w", pid, err)
	}
	return ticks(st.utime + st.stime), nil
}

// Sum returns the total CPU time of several processes.
func Sum(pids ...int) (time.Duration, error) {
	var total time.Duration
	for _, pid := range pids {
		d, err := CPUTime(pid)
		if err != nil {
			return 0, err
		}
		total += d
	}
	return total, nil
}

// ByName returns the CPU time of every process whose command name
// (/proc/<pid>/comm) is name, each with the CPU time of its exited children
// that it has waited for, and how many processes it summed. With the
// children's time the sum does not fall when a process exits: PostgreSQL's
// postmaster reaps each backend, and the backend's CPU moves into the
// postmaster's cutime and cstime.
func ByName(name string) (time.Duration, int, error) {
	return byName("/proc", name)
}

func byName(proc, name string) (time.Duration, int, error) {
	entries, err := os.ReadDir(proc)
	if err != nil {
		return 0, 0, fmt.Errorf("list processes: %w", err)
	}
	var total int64
	n := 0
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue // not a process
		}
		b, err := os.ReadFile(filepath.Join(proc, e.Name(), "stat"))
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ESRCH) {
			continue // exited since the listing
		}
		if err != nil {
			return 0, 0, fmt.Errorf("read %s/%s/stat: %w", proc, e.Name(), err)
		}
		st, err := parseStat(b)
		if err != nil {
			return 0, 0, fmt.Errorf("pid %s: %w", e.Name(), err)
		}
		if st.comm == name {
			total += st.utime + st.stime + st.cutime + st.cstime
			n++
		}
	}
	return ticks(total), n, nil
}

func ticks(n int64) time.Duration {
	return time.Duration(n) * time.Second / time.Duration(ClockTicks())
}

// RSS returns the resident set size of process pid in bytes (VmRSS of
// /proc/<pid>/status).
func RSS(pid int) (int64, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, fmt.Errorf("read memory of pid %d: %w", pid, err)
	}
	rss, err := parseRSS(b)
	if err != nil {
		return 0, fmt.Errorf("pid %d: %w", pid, err)
	}
	return rss, nil
}

// parseRSS reads the "VmRSS:    1234 kB" line of a /proc status file.
func parseRSS(b []byte) (int64, error) {
	for line := range bytes.Lines(b) {
		rest, ok := bytes.CutPrefix(line, []byte("VmRSS:"))
		if !ok {
			continue
		}
		f := bytes.Fields(rest)
		if len(f) != 2 || string(f[1]) != "kB" {
			return 0, fmt.Errorf("malformed VmRSS line %q", bytes.TrimSpace(line))
		}
		kb, err := strconv.ParseInt(string(f[0]), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("malformed VmRSS %q", f[0])
		}
		return kb * 1024, nil
	}
	return 0, errors.New("no VmRSS in /proc status (a kernel thread or a zombie)")
}

// stat is what the package reads from a /proc/<pid>/stat file; times are
// in clock ticks.
type stat struct {
	comm                         string
	utime, stime, cutime, cstime int64
}

// parseStat parses the contents of a /proc/<pid>/stat file. The command
// name (field 2) is in parentheses and may itself contain spaces and
// parentheses, so fields are counted after the last ')': state is field 3,
// utime to cstime fields 14 to 17 (proc(5)).
func parseStat(b []byte) (stat, error) {
	open, end := bytes.IndexByte(b, '('), bytes.LastIndexByte(b, ')')
	if open < 0 || end < open {
		return stat{}, errors.New("malformed /proc stat: no command name")
	}
	f := bytes.Fields(b[end+1:])
	const first = 14 - 3
	if len(f) < first+4 {
		return stat{}, fmt.Errorf("malformed /proc stat: %d fields after the command name", len(f))
	}
	st := stat{comm: string(b[open+1 : end])}
	for i, into := range []*int64{&st.utime, &st.stime, &st.cutime, &st.cstime} {
		v, err := strconv.ParseInt(string(f[first+i]), 10, 64)
		if err != nil {
			return stat{}, fmt.Errorf("malformed /proc stat field %d %q", 14+i, f[first+i])
		}
		*into = v
	}
	return st, nil
}
