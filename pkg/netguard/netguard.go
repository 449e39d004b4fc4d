// Package netguard builds HTTP clients for calls to servers that an
// organization owner configures, such as the discovery, key set, token and
// userinfo endpoints of external identity providers. Anyone who may add an
// identity provider could otherwise make Gatehouse call its own loopback
// services, the cluster's private network or a cloud metadata endpoint
// (server-side request forgery).
//
// Every connection, redirects included, is checked on the address it
// actually dials after DNS resolution. A hostname that resolves to a
// forbidden address, a rebinding DNS answer, or a redirect there all fail
// alike. Refused always, whatever the policy allows: unspecified,
// link-local, multicast, broadcast and reserved addresses, and known cloud
// metadata addresses. Refused unless AllowLoopback: loopback. Refused
// unless allowed by AllowPrivate, a prefix of Allow or a host of
// AllowHosts: private ranges (RFC 1918, RFC 6598, unique local IPv6), where
// a cluster's own services and some clouds' metadata live. IPv4-mapped and
// NAT64 forms are judged by the IPv4 address they carry. Environment
// proxies are never used, since a proxy would dial on our behalf,
// unchecked.
package netguard

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"syscall"
	"time"
)

// ErrForbidden is returned (wrapped) for a connection to an address the
// policy refuses.
var ErrForbidden = errors.New("netguard: destination address not allowed")

// Refused is the error of an address the policy refuses; it wraps
// ErrForbidden.
type Refused struct {
	Addr netip.Addr
	// Rule says what the address is, and what would allow it if anything.
	Rule string
}

func (e *Refused) Error() string { return fmt.Sprintf("%v: %s is %s", ErrForbidden, e.Addr, e.Rule) }

func (e *Refused) Unwrap() error { return ErrForbidden }

// ErrTooLarge is returned when a response body exceeds the limit.
var ErrTooLarge = errors.New("netguard: response body too large")

// Policy says which destination addresses are allowed. The zero Policy
// allows public addresses only.
type Policy struct {
	// AllowLoopback allows 127.0.0.0/8 and ::1 (GATEHOUSE_IDP_ALLOW_LOOPBACK:
	// development and tests, where the identity provider runs locally).
	AllowLoopback bool
	// AllowPrivate allows every private range (GATEHOUSE_IDP_DENY_PRIVATE=false,
	// the deprecated opt-out of the default). Metadata addresses in them
	// stay refused.
	AllowPrivate bool
	// Allow lists private ranges that are allowed (the CIDRs and addresses
	// of GATEHOUSE_IDP_ALLOW, for on-premises identity providers). Each
	// lies within a private range (ParseAllow checks).
	Allow []netip.Prefix
	// AllowHosts lists host names (lower case, no trailing dot) whose
	// addresses may be private (the names of GATEHOUSE_IDP_ALLOW). Only the
	// name dialled counts: a redirect to another name is judged by that one.
	AllowHosts []string
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
	}
	// Cloud metadata services that sit in ranges an operator may allow:
	// refused before any allowance is looked at. (169.254.169.254 and the
	// other link-local ones are refused as link-local.)
	metadata = []netip.Prefix{
		netip.MustParsePrefix("100.100.100.200/32"), // Alibaba Cloud, in carrier-grade NAT space
		netip.MustParsePrefix("fd00:ec2::254/128"),  // AWS over IPv6, in unique local space
		netip.MustParsePrefix("169.254.169.254/32"), // most clouds (also link-local)
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

// PrivateRanges names the ranges a policy refuses unless allowed, for
// messages.
const PrivateRanges = "10.0.0.0/8, 172.16.0.0/12, 192.168.0.0/16, 100.64.0.0/10, fc00::/7"

// Check returns nil when ip may be dialled by a name not in AllowHosts,
// else a *Refused naming the rule.
func (p Policy) Check(ip netip.Addr) error { return p.check("", ip) }

// CheckHost is Check for an address that host (a name, or the address
// itself) resolved to.
func (p Policy) CheckHost(host string, ip netip.Addr) error { return p.check(host, ip) }

// CheckURL refuses a URL whose host is an IP address the policy refuses,
// before anything is dialled; a host name passes (its addresses are
// checked when it is dialled, as they may change).
func (p Policy) CheckURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("netguard: %w", err)
	}
	ip, err := netip.ParseAddr(u.Hostname())
	if err != nil {
		return nil
	}
	return p.check("", ip)
}

func (p Policy) check(host string, ip netip.Addr) error {
	ip = ip.Unmap()
	if ip.Is6() && nat64.Contains(ip) {
		b := ip.As16()
		ip = netip.AddrFrom4([4]byte{b[12], b[13], b[14], b[15]})
	}
	// A zoned address matches no prefix: judge it without its zone.
	ip = ip.WithZone("")
	deny := func(why string) error { return &Refused{Addr: ip, Rule: why} }
	if in(metadata, ip) {
		return deny("a cloud metadata address")
	}
	switch {
	case !ip.IsValid() || ip.IsUnspecified():
		return deny("unspecified")
	case ip.IsLoopback():
		if p.AllowLoopback {
			return nil
		}
		return deny("loopback (allowed only with GATEHOUSE_IDP_ALLOW_LOOPBACK, for development)")
	case ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast():
		return deny("link-local (cloud metadata lives there)")
	case ip.IsMulticast() || ip.IsInterfaceLocalMulticast():
		return deny("multicast")
	case in(reserved, ip):
		return deny("reserved")
	case in(private, ip):
		if p.AllowPrivate || in(p.Allow, ip) || p.hostAllowed(host) {
			return nil
		}
		return deny("private (" + PrivateRanges + "), allowed only where GATEHOUSE_IDP_ALLOW lists it")
	}
	return nil
}

func in(prefixes []netip.Prefix, ip netip.Addr) bool {
	return slices.ContainsFunc(prefixes, func(r netip.Prefix) bool { return r.Contains(ip) })
}

func (p Policy) hostAllowed(host string) bool {
	if host == "" || len(p.AllowHosts) == 0 {
		return false
	}
	return slices.Contains(p.AllowHosts, normalHost(host))
}

func normalHost(h string) string { return strings.TrimSuffix(strings.ToLower(h), ".") }

// ParseAllow reads GATEHOUSE_IDP_ALLOW: comma-separated CIDRs, IP
// addresses and host names. A CIDR or address must lie within a private
// range: the list only lifts that refusal (loopback has its own switch;
// link-local, reserved and metadata addresses are never allowed). A name
// is matched exactly (case-insensitively), not its subdomains.
func ParseAllow(list string) (prefixes []netip.Prefix, hosts []string, err error) {
	for _, e := range strings.Split(list, ",") {
		e = strings.TrimSpace(e)
		if e == "" {
			continue
		}
		var pfx netip.Prefix
		if strings.Contains(e, "/") {
			if pfx, err = netip.ParsePrefix(e); err != nil {
				return nil, nil, fmt.Errorf("invalid CIDR %q", e)
			}
			pfx = pfx.Masked()
		} else if ip, perr := netip.ParseAddr(e); perr == nil && ip.Zone() == "" {
			pfx = netip.PrefixFrom(ip, ip.BitLen())
		} else if hostName(e) {
			hosts = append(hosts, normalHost(e))
			continue
		} else {
			return nil, nil, fmt.Errorf("%q is neither a CIDR, an IP address nor a host name", e)
		}
		if !slices.ContainsFunc(private, func(r netip.Prefix) bool { return r.Bits() <= pfx.Bits() && r.Contains(pfx.Addr()) }) {
			return nil, nil, fmt.Errorf("%q is not within a private range (%s): public addresses need no allowance, "+
				"loopback has GATEHOUSE_IDP_ALLOW_LOOPBACK, and link-local, reserved and metadata addresses are never allowed", e, PrivateRanges)
		}
		prefixes = append(prefixes, pfx)
	}
	return prefixes, hosts, nil
}

// hostName reports whether s is a DNS host name (letters, digits and
// hyphens in dot-separated labels of at most 63 characters).
func hostName(s string) bool {
	s = strings.TrimSuffix(s, ".")
	if s == "" || len(s) > 253 {
		return false
	}
	for _, l := range strings.Split(s, ".") {
		if l == "" || len(l) > 63 || l[0] == '-' || l[len(l)-1] == '-' {
			return false
		}
		for _, c := range l {
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-') {
				return false
			}
		}
	}
	return true
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
	dial := func(ctx context.Context, network, address string) (net.Conn, error) {
		// The name asked for, before resolution: AllowHosts matches it.
		host, _, err := net.SplitHostPort(address)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrForbidden, err)
		}
		d := &net.Dialer{Timeout: 5 * time.Second, Control: p.control(host)}
		return d.DialContext(ctx, network, address)
	}
	transport := &http.Transport{
		Proxy:                  nil, // a proxy would dial for us, unchecked
		DialContext:            dial,
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

// control checks the resolved address of every connection to host.
func (p Policy) control(host string) func(network, address string, _ syscall.RawConn) error {
	return func(_, address string, _ syscall.RawConn) error {
		a, _, err := net.SplitHostPort(address)
		if err != nil {
			return fmt.Errorf("%w: %v", ErrForbidden, err)
		}
		ip, err := netip.ParseAddr(a)
		if err != nil {
			return fmt.Errorf("%w: %q is not an IP address", ErrForbidden, a)
		}
		return p.check(host, ip)
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
