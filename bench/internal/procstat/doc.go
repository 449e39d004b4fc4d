// Package procstat reads the CPU time Linux processes have used so far
// (utime + stime from /proc/<pid>/stat, one process by pid or every process
// of a name with its reaped children's time) and a process's resident set
// size (VmRSS from /proc/<pid>/status). Ticks are converted with the
// kernel's USER_HZ, which is what sysconf(_SC_CLK_TCK) returns. It is how
// the benchmark charges server CPU to requests. It depends only on the
// standard library and /proc.
package procstat
