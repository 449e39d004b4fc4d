package procstat

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
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
	ticks, err := parseStat(b)
	if err != nil {
		return 0, fmt.Errorf("pid %d: %w", pid, err)
	}
	return time.Duration(ticks) * time.Second / time.Duration(ClockTicks()), nil
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

// parseStat returns utime + stime, in clock ticks, from the contents of a
// /proc/<pid>/stat file. The command name (field 2) is in parentheses and
// may itself contain spaces and parentheses, so fields are counted after
// the last ')': state is field 3, utime field 14, stime field 15 (proc(5)).
func parseStat(b []byte) (int64, error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, errors.New("malformed /proc stat: no command name")
	}
	f := bytes.Fields(b[i+1:])
	const utime, stime = 14 - 3, 15 - 3
	if len(f) <= stime {
		return 0, fmt.Errorf("malformed /proc stat: %d fields after the command name", len(f))
	}
	u, err := strconv.ParseInt(string(f[utime]), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("malformed utime %q", f[utime])
	}
	s, err := strconv.ParseInt(string(f[stime]), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("malformed stime %q", f[stime])
	}
	return u + s, nil
}
