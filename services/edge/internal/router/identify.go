package router

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/netip"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/gatehouse-id/gatehouse/pkg/logging"
	"github.com/gatehouse-id/gatehouse/pkg/rpc"
	"github.com/gatehouse-id/gatehouse/services/edge/internal/reqinfo"
)

// forwardingHeaders are believed only from a trusted proxy.
// Canonical names, deleted from the header map directly.
var forwardingHeaders = []string{"X-Forwarded-For", "X-Forwarded-Host", "X-Forwarded-Proto", "Forwarded"}

// identify is the pipeline's first step: it allocates the request's state
// (stateOf), assigns the request id, resolves the client address and
// strips forwarding headers an untrusted peer may have forged. Services
// read the client address from X-Real-Ip, which edge always overwrites;
// edge's proxy sets it again from reqinfo on the outgoing request (a
// Connection header could have removed this one) and proves it to the
// service (rpc.GuardClientAddr).
func (rt *router) identify(c *gin.Context) {
	r := c.Request
	st := &state{start: time.Now(), path: r.URL.Path}

	id := r.Header.Get("X-Request-Id")
	if !saneRequestID(id) {
		id = newRequestID()
	}
	if v := r.Header["X-Request-Id"]; len(v) != 1 || v[0] != id {
		r.Header["X-Request-Id"] = []string{id}
	}

	client := r.RemoteAddr
	trusted := false
	if ap, err := netip.ParseAddrPort(r.RemoteAddr); err == nil {
		peer := ap.Addr().Unmap()
		trusted = rt.trusted.contains(peer)
		client = rt.trusted.client(peer, trusted, r.Header.Values("X-Forwarded-For")).String()
	}
	if !trusted {
		for _, h := range forwardingHeaders {
			delete(r.Header, h)
		}
	}
	r.Header["X-Real-Ip"] = []string{client}
	// Only edge's proxy proves an address to a service.
	delete(r.Header, rpc.EdgeProofHeader)

	st.info = reqinfo.Info{RequestID: id, ClientAddr: client, PeerTrusted: trusted}
	ctx := logging.WithRequestID(reqinfo.NewContext(r.Context(), &st.info), id)
	c.Request = r.WithContext(context.WithValue(ctx, stateKey{}, st))
}

// saneRequestID accepts 1-128 characters of [A-Za-z0-9._-] (see
// logging.ValidRequestID).
func saneRequestID(id string) bool { return logging.ValidRequestID(id) }

func newRequestID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	return hex.EncodeToString(b[:])
}

type trustedSet []netip.Prefix

func parseTrusted(cidrs []string) (trustedSet, error) {
	var set trustedSet
	for _, s := range cidrs {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		if p, err := netip.ParsePrefix(s); err == nil {
			set = append(set, p.Masked())
			continue
		}
		a, err := netip.ParseAddr(s)
		if err != nil {
			return nil, fmt.Errorf("router: trusted proxy %q: not a CIDR or IP address", s)
		}
		set = append(set, netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen()))
	}
	return set, nil
}

func (t trustedSet) contains(a netip.Addr) bool {
	for _, p := range t {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// client walks X-Forwarded-For from the right, past trusted proxies, to the
// first address a trusted proxy vouched for but does not belong to one.
// Entries left of it were written by the client and are ignored.
func (t trustedSet) client(peer netip.Addr, trusted bool, xff []string) netip.Addr {
	if !trusted {
		return peer
	}
	var hops []string
	for _, v := range xff {
		hops = append(hops, strings.Split(v, ",")...)
	}
	cur := peer
	for i := len(hops) - 1; i >= 0; i-- {
		a, ok := parseHop(strings.TrimSpace(hops[i]))
		if !ok {
			return cur
		}
		if !t.contains(a) {
			return a
		}
		cur = a
	}
	return cur
}

func parseHop(s string) (netip.Addr, bool) {
	if a, err := netip.ParseAddr(s); err == nil {
		return a.Unmap(), true
	}
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return ap.Addr().Unmap(), true
	}
	return netip.Addr{}, false
}
