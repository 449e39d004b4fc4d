package process

import (
	"os"
	"path/filepath"
	"runtime/debug"
	"testing"
)

// fakeRoot writes files (path → content) under a temporary root.
func fakeRoot(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for p, c := range files {
		full := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func TestCgroupMemoryLimit(t *testing.T) {
	cases := []struct {
		name  string
		files map[string]string
		want  int64
	}{
		{"v2 in a container's namespace", map[string]string{
			"proc/self/cgroup":         "0::/\n",
			"sys/fs/cgroup/memory.max": "268435456\n",
		}, 256 << 20},
		{"v2 unlimited", map[string]string{
			"proc/self/cgroup":         "0::/\n",
			"sys/fs/cgroup/memory.max": "max\n",
		}, 0},
		{"v2 nested: the smallest along the path", map[string]string{
			"proc/self/cgroup":                                "0::/kubepods/pod1/ctr\n",
			"sys/fs/cgroup/kubepods/pod1/ctr/memory.max":      "max\n",
			"sys/fs/cgroup/kubepods/pod1/memory.max":          "536870912\n",
			"sys/fs/cgroup/kubepods/memory.max":               "1073741824\n",
			"sys/fs/cgroup/kubepods/pod1/ctr/memory.high":     "1\n", // not a limit it reads
			"sys/fs/cgroup/kubepods/pod1/ctr/cgroup.procs":    "1\n",
			"sys/fs/cgroup/kubepods/pod1/ctr/memory.current":  "1\n",
			"sys/fs/cgroup/kubepods/pod1/ctr/memory.swap.max": "0\n",
		}, 512 << 20},
		{"v1", map[string]string{
			"proc/self/cgroup": "12:cpu,cpuacct:/docker/abc\n4:memory:/docker/abc\n",
			"sys/fs/cgroup/memory/docker/abc/memory.limit_in_bytes": "134217728\n",
		}, 128 << 20},
		{"v1 unlimited (the page-rounded maximum)", map[string]string{
			"proc/self/cgroup":                           "4:memory:/\n",
			"sys/fs/cgroup/memory/memory.limit_in_bytes": "9223372036854771712\n",
		}, 0},
		{"no cgroup file", map[string]string{}, 0},
		{"garbage", map[string]string{
			"proc/self/cgroup":         "0::/\n",
			"sys/fs/cgroup/memory.max": "lots\n",
		}, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := cgroupMemoryLimit(fakeRoot(t, tc.files)); got != tc.want {
				t.Fatalf("limit = %d; want %d", got, tc.want)
			}
		})
	}
}

// The container's limit becomes the heap's soft limit, below it; an
// operator's GOMEMLIMIT wins.
func TestTuneGCFollowsTheContainerLimit(t *testing.T) {
	prevLimit, prevPercent := debug.SetMemoryLimit(-1), debug.SetGCPercent(150)
	t.Cleanup(func() {
		debug.SetMemoryLimit(prevLimit)
		debug.SetGCPercent(prevPercent)
	})
	root := fakeRoot(t, map[string]string{"proc/self/cgroup": "0::/\n", "sys/fs/cgroup/memory.max": "1073741824\n"})
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

	gib := int64(1 << 30)
	want := int64(float64(gib) * memoryLimitShare)
	if got := tuneGC(env(nil), root); got != want {
		t.Fatalf("memory limit set = %d; want 90%% of 1 GiB", got)
	}
	if got := debug.SetMemoryLimit(-1); got != want {
		t.Fatalf("runtime memory limit = %d; want 90%% of 1 GiB", got)
	}
	if got := debug.SetGCPercent(-1); got != 150 {
		t.Fatalf("GC percent = %d; want what GOGC made it (150): tuneGC leaves it", got)
	}
	debug.SetMemoryLimit(prevLimit)
	debug.SetGCPercent(100)
	if got := tuneGC(env(map[string]string{"GOMEMLIMIT": "200MiB", "GOGC": "50"}), root); got != 0 {
		t.Fatalf("with GOMEMLIMIT set, tuneGC set a limit of %d", got)
	}
	if got := debug.SetGCPercent(-1); got != 100 {
		t.Fatalf("with GOGC set, GC percent changed to %d", got)
	}
}
