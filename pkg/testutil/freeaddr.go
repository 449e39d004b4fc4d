package testutil

import (
	"bufio"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"sync"
	"testing"
)

// Ports FreeAddr hands out: below the kernel's ephemeral range (Linux's
// default starts at 32768), above the well-known services.
const (
	freeLow  = 10000
	freeHigh = 32768
)

var freePorts struct {
	sync.Mutex
	next int          // the next candidate; 0 until the first call
	high int          // the end of the range in effect
	used map[int]bool // handed out in this process
}

// FreeAddr returns a loopback address that nothing listens on, for a
// server whose URL must be known before it starts (an issuer, a process
// that is killed and started again in place).
//
// Listening on port 0 and closing the listener is not enough: the kernel
// may hand the same port to the next listener on port 0 (another server of
// the same test, or of a parallel one) before the server binds it. So the
// port lies below the ephemeral range, where no listener on port 0 and no
// outgoing connection is ever placed, and no port is handed out twice in
// one process; test binaries running at once start at different places of
// the range, and a port found taken is skipped.
func FreeAddr(t testing.TB) string {
	t.Helper()
	freePorts.Lock()
	defer freePorts.Unlock()
	if freePorts.used == nil {
		freePorts.used = map[int]bool{}
		freePorts.high = min(freeHigh, ephemeralLow())
		freePorts.next = freeLow
		if span := freePorts.high - freeLow; span > 0 {
			freePorts.next += rand.IntN(span)
		}
	}
	span := freePorts.high - freeLow
	for range span {
		port := freePorts.next
		if freePorts.next++; freePorts.next >= freePorts.high {
			freePorts.next = freeLow
		}
		if freePorts.used[port] {
			continue
		}
		freePorts.used[port] = true
		ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			continue // taken by someone else
		}
		addr := ln.Addr().String()
		if err := ln.Close(); err != nil {
			t.Fatalf("free address: close %s: %v", addr, err)
		}
		return addr
	}
	// Below the ephemeral range nothing is left (or there is no room
	// below it): fall back to the kernel's choice.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("free address: %v", err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// ephemeralLow is the first port of the kernel's ephemeral range
// (freeHigh where it cannot be read).
func ephemeralLow() int {
	f, err := os.Open("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return freeHigh
	}
	defer f.Close()
	var low, high int
	if _, err := fmt.Fscan(bufio.NewReader(f), &low, &high); err != nil {
		return freeHigh
	}
	return max(low, freeLow) // freeLow: no room below the range

}
