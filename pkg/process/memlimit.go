package process

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// memoryLimitShare is the part of the container's memory limit the Go heap
// is held to (GOMEMLIMIT), leaving room for stacks, the binary and what
// the runtime does not count, so the collector works harder before the
// kernel kills the process rather than after.
const memoryLimitShare = 0.9

// cgroupMemoryLimit returns the memory limit of the cgroup this process runs
// in (cgroup v2, else v1), the smallest along its path, or 0 when there
// is none. root is "/" but for tests.
func cgroupMemoryLimit(root string) int64 {
	self, err := os.ReadFile(filepath.Join(root, "proc/self/cgroup"))
	if err != nil {
		return 0
	}
	var limit int64
	lower := func(n int64) {
		if n > 0 && (limit == 0 || n < limit) {
			limit = n
		}
	}
	sc := bufio.NewScanner(bytes.NewReader(self))
	for sc.Scan() {
		// hierarchy-ID:controllers:path; v2 is "0::/path".
		parts := strings.SplitN(sc.Text(), ":", 3)
		if len(parts) != 3 {
			continue
		}
		switch {
		case parts[0] == "0" && parts[1] == "":
			for _, dir := range ancestors(parts[2]) {
				lower(readLimit(filepath.Join(root, "sys/fs/cgroup", dir, "memory.max")))
			}
		case hasController(parts[1], "memory"):
			for _, dir := range ancestors(parts[2]) {
				lower(readLimit(filepath.Join(root, "sys/fs/cgroup/memory", dir, "memory.limit_in_bytes")))
			}
		}
	}
	return limit
}

// ancestors lists path and its parents up to "/". Inside a container's
// cgroup namespace the path is "/" and the limit is at the mount's root.
func ancestors(path string) []string {
	path = filepath.Clean("/" + path)
	out := []string{path}
	for path != "/" {
		path = filepath.Dir(path)
		out = append(out, path)
	}
	return out
}

func hasController(list, name string) bool {
	for _, c := range strings.Split(list, ",") {
		if c == name {
			return true
		}
	}
	return false
}

// readLimit reads a limit file: a byte count, or "max" (v2) or a huge
// number (v1: the page-rounded maximum) for none.
func readLimit(path string) int64 {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil || n <= 0 || n >= 1<<60 {
		return 0
	}
	return n
}
