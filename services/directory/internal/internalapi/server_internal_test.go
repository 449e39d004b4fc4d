package internalapi

import (
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"testing"

	"connectrpc.com/connect"
)

// TestDatabaseOutageIsUnavailable: a database that cannot answer is
// Unavailable to the calling service, which then answers its own client
// with a retry hint (authn: 503 temporarily_unavailable) or serves from its
// cache; any other failure is Internal. Found by e2e's
// TestFaultDatabaseRestart: authorize answered 500 while PostgreSQL
// restarted.
func TestDatabaseOutageIsUnavailable(t *testing.T) {
	for _, c := range []struct {
		name string
		err  error
		want connect.Code
	}{
		{"connection refused", &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}, connect.CodeUnavailable},
		{"connection lost", fmt.Errorf("query: %w", io.ErrUnexpectedEOF), connect.CodeUnavailable},
		{"bad connection", driver.ErrBadConn, connect.CodeUnavailable},
		{"a bug", errors.New("scan: wrong number of columns"), connect.CodeInternal},
	} {
		if got := connect.CodeOf(internalErr(c.err, "get app client")); got != c.want {
			t.Errorf("internalErr(%s) = %v; want %v", c.name, got, c.want)
		}
		if got := connect.CodeOf(asInvalid(c.err)); got != c.want {
			t.Errorf("asInvalid(%s) = %v; want %v", c.name, got, c.want)
		}
	}
}
