package proxy

import (
	"net"
	"syscall"
)

// alive reports whether an idle connection is still open and silent: the
// service may have closed it (a restart, its idle timeout) while it was
// kept, and a request written to it would be lost. One non-blocking peek.
func alive(c net.Conn) bool {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return true
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	open := false
	var buf [1]byte
	err = raw.Read(func(fd uintptr) bool {
		_, _, err := syscall.Recvfrom(int(fd), buf[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		// Nothing to read (EAGAIN): open and silent. EOF or unasked-for
		// bytes (no error) or a reset: not reusable.
		open = err == syscall.EAGAIN || err == syscall.EWOULDBLOCK
		return true
	})
	return err == nil && open
}
