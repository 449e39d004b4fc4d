//go:build !linux

package proxy

import "net"

// alive cannot peek here; a request on a connection the service closed
// meanwhile fails and is retried when nothing of it was sent.
func alive(net.Conn) bool { return true }
