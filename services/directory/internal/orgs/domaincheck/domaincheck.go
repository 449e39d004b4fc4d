// Package domaincheck looks for an organization's domain validation token
// where the organization was told to put it: a file over HTTP, or a DNS
// TXT record.
package domaincheck

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/gatehouse-id/gatehouse/services/directory/internal/orgs"
)

// Timeout bounds one check.
const Timeout = 10 * time.Second

// Checker implements orgs.Checker.
type Checker struct {
	// HTTP fetches the file: a pkg/netguard client, so a domain naming
	// an internal address cannot make the directory call it.
	HTTP *http.Client
	// Resolver asks for the TXT record (NewResolver).
	Resolver *net.Resolver
}

var _ orgs.Checker = Checker{}

// errMissing: the token is not where it should be.
var errMissing = errors.New("the token is not there")

// CheckHTTP fetches http://domain/.well-known/gatehouse-challenge/token
// and wants the token as its body (surrounding space ignored). Redirects
// are followed only within the domain.
func (c Checker) CheckHTTP(ctx context.Context, domain, token string) error {
	ctx, cancel := context.WithTimeout(ctx, Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+domain+orgs.ChallengePath+token, nil)
	if err != nil {
		return err
	}
	client := *c.HTTP
	next := client.CheckRedirect
	client.CheckRedirect = func(r *http.Request, via []*http.Request) error {
		if !strings.EqualFold(r.URL.Hostname(), domain) {
			return fmt.Errorf("a redirect to another host (%s)", r.URL.Hostname())
		}
		if next != nil {
			return next(r, via)
		}
		return nil
	}
	res, err := client.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("the file answered %d", res.StatusCode)
	}
	body, err := io.ReadAll(io.LimitReader(res.Body, 4<<10))
	if err != nil {
		return err
	}
	if subtle.ConstantTimeCompare([]byte(strings.TrimSpace(string(body))), []byte(token)) != 1 {
		return fmt.Errorf("the file holds something else: %w", errMissing)
	}
	return nil
}

// CheckDNS asks for the TXT records of _gatehouse-challenge.domain and
// wants one to be the token.
func (c Checker) CheckDNS(ctx context.Context, domain, token string) error {
	ctx, cancel := context.WithTimeout(ctx, Timeout)
	defer cancel()
	r := c.Resolver
	if r == nil {
		r = net.DefaultResolver
	}
	txts, err := r.LookupTXT(ctx, orgs.ChallengeLabel+domain)
	if err != nil {
		return err
	}
	for _, t := range txts {
		if subtle.ConstantTimeCompare([]byte(strings.TrimSpace(t)), []byte(token)) == 1 {
			return nil
		}
	}
	return fmt.Errorf("no TXT record holds it: %w", errMissing)
}

// NewResolver is the system's resolver for addr "", else one that asks
// the DNS server at addr (host:port) only (GATEHOUSE_DNS_RESOLVER).
func NewResolver(addr string) *net.Resolver {
	if addr == "" {
		return net.DefaultResolver
	}
	return &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, network, addr)
	}}
}
