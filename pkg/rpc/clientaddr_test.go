package rpc_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gatehouse-id/gatehouse/pkg/rpc"
)

func TestGuardClientAddr(t *testing.T) {
	const token = "0123456789abcdef0123456789abcdef"
	proof := rpc.EdgeProof(token)
	cases := []struct {
		name   string
		remote string
		header map[string][]string
		want   string
	}{
		{"forged without proof", "192.0.2.1:4321", map[string][]string{"X-Real-Ip": {"203.0.113.9"}}, "192.0.2.1"},
		{"forged with a wrong proof", "192.0.2.1:4321", map[string][]string{"X-Real-Ip": {"203.0.113.9"}, rpc.EdgeProofHeader: {rpc.EdgeProof("another-token-0123456789abcdef0123")}}, "192.0.2.1"},
		{"forged with the internal credential itself", "192.0.2.1:4321", map[string][]string{"X-Real-Ip": {"203.0.113.9"}, rpc.EdgeProofHeader: {token}}, "192.0.2.1"},
		{"from edge", "192.0.2.1:4321", map[string][]string{"X-Real-Ip": {"203.0.113.9"}, rpc.EdgeProofHeader: {proof}}, "203.0.113.9"},
		{"from edge, several values", "192.0.2.1:4321", map[string][]string{"X-Real-Ip": {"203.0.113.9", "198.51.100.1"}, rpc.EdgeProofHeader: {proof}}, "203.0.113.9"},
		{"from edge without an address", "192.0.2.1:4321", map[string][]string{rpc.EdgeProofHeader: {proof}}, "192.0.2.1"},
		{"none", "[::ffff:192.0.2.1]:4321", nil, "192.0.2.1"},
		{"IPv6 peer", "[2001:db8::1]:4321", map[string][]string{"X-Real-Ip": {"203.0.113.9"}}, "2001:db8::1"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var got http.Header
			h := rpc.GuardClientAddr(token, http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) { got = r.Header.Clone() }))
			req := httptest.NewRequest(http.MethodGet, "/", nil)
			req.RemoteAddr = c.remote
			for k, v := range c.header {
				req.Header[k] = v
			}
			h.ServeHTTP(httptest.NewRecorder(), req)
			if v := got.Values("X-Real-Ip"); len(v) != 1 || v[0] != c.want {
				t.Errorf("X-Real-Ip %q; want [%s]", v, c.want)
			}
			if v := got.Get(rpc.EdgeProofHeader); v != "" {
				t.Errorf("the proof reached the handler: %q", v)
			}
		})
	}
}

func TestGuardClientAddrWithoutTokenTrustsNothing(t *testing.T) {
	var got string
	h := rpc.GuardClientAddr("", http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) { got = r.Header.Get("X-Real-Ip") }))
	req := httptest.NewRequest(http.MethodGet, "/", nil)
	req.RemoteAddr = "192.0.2.1:4321"
	req.Header.Set("X-Real-Ip", "203.0.113.9")
	req.Header.Set(rpc.EdgeProofHeader, rpc.EdgeProof(""))
	h.ServeHTTP(httptest.NewRecorder(), req)
	if got != "192.0.2.1" {
		t.Fatalf("X-Real-Ip %q; want the peer 192.0.2.1", got)
	}
}

func TestEdgeProofIsNotTheToken(t *testing.T) {
	const token = "0123456789abcdef0123456789abcdef"
	p := rpc.EdgeProof(token)
	if p == "" || strings.Contains(p, token) || p == rpc.EdgeProof(token+"x") {
		t.Fatalf("EdgeProof(%q) = %q; want a derived value that differs per token", token, p)
	}
	if rpc.EdgeProof("") != "" {
		t.Fatal("EdgeProof of no token is not empty")
	}
}
