//go:build unix

package secrets

import "syscall"

// allocHashMemory maps n bytes of anonymous memory outside the Go heap
// (nil when the kernel refuses): the collector neither scans it nor counts
// it toward its next goal.
func allocHashMemory(n int) []byte {
	b, err := syscall.Mmap(-1, 0, n, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANON)
	if err != nil {
		return nil
	}
	return b
}

func freeHashMemory(b []byte) { _ = syscall.Munmap(b) }
