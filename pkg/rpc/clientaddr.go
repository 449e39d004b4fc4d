package rpc

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"net"
	"net/http"
	"net/netip"
)

// ClientAddrHeader carries the client's address from edge to a service.
const ClientAddrHeader = "X-Real-Ip"

// EdgeProofHeader tells a service that a request came through edge, so
// its ClientAddrHeader is the address edge resolved and not one the client
// wrote. Its value is EdgeProof of the internal token: derived, so the
// header edge adds to every public request it forwards cannot stand in for
// the internal credential, which opens the internal Connect services.
const EdgeProofHeader = "Gatehouse-Edge-Proof"

// EdgeProof is the value of EdgeProofHeader for the internal token; "" for
// an empty token (nothing is proven).
func EdgeProof(internalToken string) string {
	if internalToken == "" {
		return ""
	}
	mac := hmac.New(sha256.New, []byte(internalToken))
	mac.Write([]byte("gatehouse/edge-proof/v1"))
	return base64.RawURLEncoding.EncodeToString(mac.Sum(nil))
}

// GuardClientAddr makes ClientAddrHeader trustworthy for next, a service
// run as its own process: the header is kept only on requests that carry
// EdgeProofHeader for internalToken (edge forwarded them), and is otherwise
// replaced by the TCP peer's address, so a caller that reaches the service
// directly cannot pick the address that per-address lockouts count. The
// proof header itself never reaches next.
func GuardClientAddr(internalToken string, next http.Handler) http.Handler {
	proof := []byte(EdgeProof(internalToken))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got := r.Header.Get(EdgeProofHeader)
		fromEdge := len(proof) > 0 && got != "" && subtle.ConstantTimeCompare([]byte(got), proof) == 1
		delete(r.Header, EdgeProofHeader)
		addr := r.Header.Get(ClientAddrHeader)
		if !fromEdge || addr == "" {
			addr = peerAddr(r.RemoteAddr)
		}
		r.Header[ClientAddrHeader] = []string{addr}
		next.ServeHTTP(w, r)
	})
}

// peerAddr is the IP address of a RemoteAddr, written as edge writes it.
func peerAddr(remote string) string {
	if ap, err := netip.ParseAddrPort(remote); err == nil {
		return ap.Addr().Unmap().String()
	}
	if host, _, err := net.SplitHostPort(remote); err == nil {
		return host
	}
	return remote
}
