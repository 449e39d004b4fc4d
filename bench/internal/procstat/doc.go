// Package procstat reads the CPU time a Linux process has used so far
// (utime + stime from /proc/<pid>/stat), converted from clock ticks with
// the kernel's USER_HZ, which is what sysconf(_SC_CLK_TCK) returns. It is
// how the benchmark charges server CPU to requests. It depends only on the
// standard library and /proc.
package procstat
