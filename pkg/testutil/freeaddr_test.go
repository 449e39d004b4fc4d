package testutil

import (
	"net"
	"strconv"
	"testing"
)

// TestFreeAddr: the addresses are bindable, never handed out twice, and
// lie below the ephemeral range, where a listener on port 0 cannot take
// them.
func TestFreeAddr(t *testing.T) {
	t.Parallel()
	low := ephemeralLow()
	seen := map[string]bool{}
	for range 50 {
		addr := FreeAddr(t)
		if seen[addr] {
			t.Fatalf("%s handed out twice", addr)
		}
		seen[addr] = true
		_, p, _ := net.SplitHostPort(addr)
		if port, _ := strconv.Atoi(p); low > freeLow && (port < freeLow || port >= low) {
			t.Fatalf("%s: want a port in [%d, %d)", addr, freeLow, low)
		}
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			t.Fatalf("listen on %s: %v", addr, err)
		}
		// Held while the next ones are handed out: they must differ.
		defer ln.Close()
	}
}
