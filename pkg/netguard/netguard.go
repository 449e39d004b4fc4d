// Package netguard builds HTTP clients for calls to servers that an
// organization owner configures, such as the discovery, key set, token and
// userinfo endpoints of external identity providers. Anyone who may add an
// identity provider could otherwise make Gatehouse call its own loopback
// services or a cloud metadata endpoint (server-side request forgery).
//
// Every connection, redirects included, is checked on the address it
// actually dials after DNS resolution. A hostname that resolves to a
// forbidden address, a rebinding DNS answer, or a redirect there all fail
// alike. Refused always: unspecified, link-local, multicast, broadcast and
// reserved addresses, and known cloud metadata addresses. Refused unless
// AllowLoopback: loopback. Refused when DenyPrivate: private ranges
// (RFC 1918, RFC 6598, unique local IPv6). IPv4-mapped and NAT64 forms are
// judged by the IPv4 address they carry. Environment proxies are never
// used, since a proxy would dial on our behalf, unchecked.
package netguard

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"syscall"
	"time"
)

// ErrForbidden is returned (wrapped) for a connection to an address the
// policy refuses.
var ErrForbidden = errors.New("netguard: destination address not allowed")

// ErrTooLarge is returned when a response body exceeds the limit.
var ErrTooLarge = errors.New("netguard: response body too large")

// Policy says which destination addresses are allowed.
type Policy struct {
	// AllowLoopback allows 127.0.0.0/8 and ::1 (GATEHOUSE_IDP_ALLOW_LOOPBACK:
	// development and tests, where the identity provider runs locally).
	AllowLoopback bool
	// DenyPrivate refuses private ranges too (GATEHOUSE_IDP_DENY_PRIVATE).
	// They are allowed by default: enterprise identity providers live there.
	DenyPrivate bool
}

var (
	// Refused always, besides what netip classifies (see Check).
	reserved = []netip.Prefix{
		netip.MustParsePrefix("0.0.0.0/8"),       // "this network"
		netip.MustParsePrefix("192.0.0.0/24"),    // IETF protocol assignments
		netip.MustParsePrefix("192.0.2.0/24"),    // documentation
		netip.MustParsePrefix("198.18.0.0/15"),   // benchmarking
		netip.MustParsePrefix("198.51.100.0/24"), // documentation
		netip.MustParsePrefix("203.0.113.0/24"),  // documentation
		netip.MustParsePrefix("240.0.0.0/4"),     // reserved, broadcast
		netip.MustParsePrefix("2001:db8::/32"),   // documentation
		netip.MustParsePrefix("fd00:ec2::254/128"),
	}
	private = []netip.Prefix{
		netip.MustParsePrefix("10.0.0.0/8"),
		netip.MustParsePrefix("172.16.0.0/12"),
		netip.MustParsePrefix("192.168.0.0/16"),
		netip.MustParsePrefix("100.64.0.0/10"), // carrier-grade NAT
		netip.MustParsePrefix("fc00::/7"),
	}
	nat64 = netip.MustParsePrefix("64:ff9b::/96")
)

// Check returns nil when ip may be dialled, else an error wrapping
// ErrForbidden that names the reason.
func (p Policy) Check(ip netip.Addr) error {
	ip = ip.Unmap()
	if ip.Is6() && nat64.Contains(ip) {
		b := ip.As16()
		ip = netip.AddrFrom4([4]byte{b[12], b[13], b[14], b[15]})
	}
	deny := func(why string) error { return fmt.Errorf("%w: %s is %s", ErrForbidden, ip, why) }
	switch {
	case !ip.IsValid() || ip.IsUnspecified():
		return deny("unspecified")
	case ip.IsLoopback():
		if p.AllowLoopback {
			return nil
		}
		return deny("loopback")
	case ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast():
		return deny("link-local (cloud metadata lives there)")
	case ip.IsMulticast() || ip.IsInterfaceLocalMulticast():
		return deny("multicast")
	}
	for _, r := range reserved {
		if r.Contains(ip) {
			return deny("reserved")
		}
	}
	if p.DenyPrivate {
		for _, r := range private {
			if r.Contains(ip) {
				return deny("private")
			}
		}
	}
	return nil
}

// Options bound a client's calls.
type Options struct {
	// Timeout bounds a whole call, redirects and body included.
	Timeout time.Duration
	// MaxBody bounds each response body; reading past it fails with
	// ErrTooLarge.
	MaxBody int64
	// MaxRedirects bounds the redirects followed.
	MaxRedirects int
}

// Defaults for zero Options.
const (
	DefaultTimeout      = 10 * time.Second
	DefaultMaxBody      = 1 << 20
	DefaultMaxRedirects = 3
)

// Client returns an HTTP client that dials only addresses p allows and
// bounds time, redirects and body sizes.
func (p Policy) Client(o Options) *http.Client {
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.MaxBody <= 0 {
		o.MaxBody = DefaultMaxBody
	}
	if o.MaxRedirects <= 0 {
		o.MaxRedirects = DefaultMaxRedirects
	}
	dialer := &net.Dialer{
		Timeout: 5 * time.Second,
		// Control runs for the resolved address of every connection.
		Control: func(network, address string, _ syscall.RawConn) error {
			host, _, err := net.SplitHostPort(address)
			if err != nil {
				return fmt.Errorf("%w: %v", ErrForbidden, err)
			}
			ip, err := netip.ParseAddr(host)
			if err != nil {
				return fmt.Errorf("%w: %q is not an IP address", ErrForbidden, host)
			}
			return p.Check(ip)
		},
	}
	transport := &http.Transport{
		Proxy:                  nil, // a proxy would dial for us, unchecked
		DialContext:            dialer.DialContext,
		ForceAttemptHTTP2:      true,
		TLSHandshakeTimeout:    5 * time.Second,
		ResponseHeaderTimeout:  o.Timeout,
		MaxResponseHeaderBytes: 64 << 10,
		IdleConnTimeout:        90 * time.Second,
		MaxIdleConnsPerHost:    4,
	}
	return &http.Client{
		Timeout:   o.Timeout,
		Transport: &limited{next: transport, max: o.MaxBody},
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if len(via) > o.MaxRedirects {
				return fmt.Errorf("netguard: more than %d redirects", o.MaxRedirects)
			}
			if req.URL.Scheme != "https" && req.URL.Scheme != "http" {
				return fmt.Errorf("%w: redirect to scheme %q", ErrForbidden, req.URL.Scheme)
			}
			return nil
		},
	}
}

// limited bounds every response body.
type limited struct {
	next http.RoundTripper
	max  int64
}

func (l *limited) RoundTrip(req *http.Request) (*http.Response, error) {
	res, err := l.next.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	if res.ContentLength > l.max {
		_ = res.Body.Close()
		return nil, fmt.Errorf("%w: %d bytes announced, at most %d", ErrTooLarge, res.ContentLength, l.max)
	}
	res.Body = &limitedBody{rc: res.Body, left: l.max}
	return res, nil
}

type limitedBody struct {
	rc   io.ReadCloser
	left int64
}

func (b *limitedBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		// One byte more tells a body of exactly the limit from a larger one.
		var one [1]byte
		if n, _ := b.rc.Read(one[:]); n > 0 {
			return 0, ErrTooLarge
		}
		return 0, io.EOF
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.rc.Read(p)
	b.left -= int64(n)
	return n, err
}

func (b *limitedBody) Close() error { return b.rc.Close() }
