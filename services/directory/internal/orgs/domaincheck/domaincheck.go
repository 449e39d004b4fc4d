// Package domaincheck looks for an organization's domain validation token
// where package orgs told the organization to put it: the body of
// http://<domain>/.well-known/gatehouse-challenge/<token>, or a TXT record
// of _gatehouse-challenge.<domain>. It depends on orgs (the names) and,
// for a default HTTP client, pkg/netguard.
package domaincheck

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/gatehouse-id/gatehouse/pkg/netguard"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/orgs"
)

// Limits of one check.
const (
	// Timeout bounds one check (connections, redirects, body; or the DNS
	// lookup).
	Timeout = 10 * time.Second
	// MaxRedirects bounds the redirects followed, each to the domain
	// itself.
	MaxRedirects = 3
	// maxBody bounds the file read; a token is 26 characters.
	maxBody = 4 << 10
)

// Checker implements orgs.Checker.
type Checker struct {
	// HTTP fetches the file. It must be a pkg/netguard client
	// (Policy.Client), so that a domain resolving to an internal address
	// cannot make the directory call it; nil is netguard's default policy
	// (public addresses only).
	HTTP *http.Client
	// Resolver asks for the TXT record (NewResolver); nil is the system's.
	Resolver *net.Resolver
}

var _ orgs.Checker = Checker{}

// Error is a failed check. Its message is client-safe (it says what was
// found, never an address of the directory's network, its resolver or a
// policy's settings): orgs shows it to the organization. Err is the
// cause, for logs and errors.Is (netguard.ErrForbidden, a *net.DNSError,
// context.DeadlineExceeded…).
type Error struct {
	Msg string
	Err error
}

func (e *Error) Error() string { return e.Msg }

func (e *Error) Unwrap() error { return e.Err }

func fail(err error, format string, args ...any) *Error {
	return &Error{Msg: fmt.Sprintf(format, args...), Err: err}
}

// errRedirect: a redirect the check does not follow.
type errRedirect struct{ why string }

func (e *errRedirect) Error() string { return e.why }

// CheckHTTP GETs http://domain/.well-known/gatehouse-challenge/token and
// wants 200 with the token as its body (surrounding white space ignored;
// compared in constant time). Redirects are followed up to MaxRedirects,
// only to the domain itself over http or https on its default port.
// Errors are *Error: the file not found (404), another status, another
// body, a redirect elsewhere, an address the client's policy refuses, no
// answer in time (Timeout, or ctx's deadline if sooner), no connection.
func (c Checker) CheckHTTP(ctx context.Context, domain, token string) error {
	if !plainName(domain) {
		return fail(nil, "%q is not a domain name", domain)
	}
	ctx, cancel := context.WithTimeout(ctx, Timeout)
	defer cancel()
	u := &url.URL{Scheme: "http", Host: domain, Path: orgs.ChallengePath + token}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return fail(err, "the file's URL is not valid")
	}
	hc := c.HTTP
	if hc == nil {
		hc = netguard.Policy{}.Client(netguard.Options{Timeout: Timeout, MaxRedirects: MaxRedirects})
	}
	client := *hc // a copy: its CheckRedirect is this check's
	next := client.CheckRedirect
	client.CheckRedirect = func(r *http.Request, via []*http.Request) error {
		if len(via) > MaxRedirects {
			return &errRedirect{fmt.Sprintf("it redirects more than %d times", MaxRedirects)}
		}
		host, port := strings.TrimSuffix(r.URL.Hostname(), "."), r.URL.Port()
		switch {
		case !strings.EqualFold(host, domain):
			return &errRedirect{fmt.Sprintf("it redirects to another host (%s); only redirects within %s are followed", r.URL.Hostname(), domain)}
		case r.URL.Scheme != "http" && r.URL.Scheme != "https":
			return &errRedirect{fmt.Sprintf("it redirects to a %q URL", r.URL.Scheme)}
		case port != "" && !(r.URL.Scheme == "http" && port == "80" || r.URL.Scheme == "https" && port == "443"):
			return &errRedirect{fmt.Sprintf("it redirects to port %s; only the default ports are followed", port)}
		}
		if next != nil {
			return next(r, via)
		}
		return nil
	}
	res, err := client.Do(req)
	if err != nil {
		return httpError(err)
	}
	defer res.Body.Close()
	switch {
	case res.StatusCode == http.StatusNotFound:
		return fail(nil, "the file was not found (404)")
	case res.StatusCode != http.StatusOK:
		return fail(nil, "it answered %d, not 200 with the token", res.StatusCode)
	}
	body, err := io.ReadAll(io.LimitReader(res.Body, maxBody+1))
	switch {
	case errors.Is(err, netguard.ErrTooLarge) || len(body) > maxBody:
		return fail(err, "the file is larger than %d bytes; its body must be the token alone", maxBody)
	case err != nil:
		return fail(err, "reading the file failed")
	}
	if !equal(strings.TrimSpace(string(body)), token) {
		return fail(nil, "the file's body is not the token")
	}
	return nil
}

// httpError turns a failed request into a client-safe *Error.
func httpError(err error) error {
	var redirect *errRedirect
	var dnsErr *net.DNSError
	switch {
	case errors.As(err, &redirect):
		return fail(err, "%s", redirect.why)
	case errors.Is(err, netguard.ErrForbidden):
		return fail(err, "the domain's address is not one the directory may call (an internal or reserved address)")
	case errors.Is(err, netguard.ErrTooLarge):
		return fail(err, "the answer is too large")
	case timeout(err):
		return fail(err, "no answer in time")
	case errors.As(err, &dnsErr) && dnsErr.IsNotFound:
		return fail(err, "the domain has no address")
	case errors.As(err, &dnsErr):
		return fail(err, "the domain's address could not be looked up")
	}
	return fail(err, "the connection to the domain failed")
}

func timeout(err error) bool {
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne) && ne.Timeout()
}

// CheckDNS looks up the TXT records of _gatehouse-challenge.domain (as an
// absolute name: no search domains) and wants one to be the token
// (surrounding white space ignored; a record's strings joined; compared in
// constant time). Errors are *Error: no such record, none holding the
// token, no answer in time, a failed lookup.
func (c Checker) CheckDNS(ctx context.Context, domain, token string) error {
	if !plainName(domain) {
		return fail(nil, "%q is not a domain name", domain)
	}
	ctx, cancel := context.WithTimeout(ctx, Timeout)
	defer cancel()
	r := c.Resolver
	if r == nil {
		r = net.DefaultResolver
	}
	name := orgs.ChallengeLabel + domain
	txts, err := r.LookupTXT(ctx, name+".")
	var dnsErr *net.DNSError
	switch {
	case err == nil:
	case errors.As(err, &dnsErr) && dnsErr.IsNotFound:
		return fail(err, "there is no such TXT record")
	case timeout(err):
		return fail(err, "the DNS lookup got no answer in time")
	default:
		return fail(err, "the DNS lookup failed")
	}
	for _, t := range txts {
		if equal(strings.TrimSpace(t), token) {
			return nil
		}
	}
	return fail(nil, "none of its %d TXT records is the token", len(txts))
}

func equal(a, b string) bool { return subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1 }

// plainName reports whether domain is a bare host name: letters, digits,
// hyphens and dots (orgs.NormalizeDomain's output), nothing that would
// change the URL or the DNS name built from it.
func plainName(domain string) bool {
	if domain == "" || len(domain) > 253 {
		return false
	}
	for _, r := range domain {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '.') {
			return false
		}
	}
	return true
}

// NewResolver returns the system's resolver for addr "", else a pure-Go
// resolver that sends every query to the DNS server at addr (host:port;
// GATEHOUSE_DNS_RESOLVER), over UDP or TCP as the resolver chooses.
func NewResolver(addr string) *net.Resolver {
	if addr == "" {
		return net.DefaultResolver
	}
	return &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, network, addr)
	}}
}
