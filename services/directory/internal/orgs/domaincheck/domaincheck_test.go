package domaincheck_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gatehouse-id/gatehouse/pkg/netguard"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/orgs"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/orgs/domaincheck"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/orgs/domaincheck/dnstest"
)

const token = "TOKEN1234567890ABCDEFGHIJK"

// wantFail checks err is a *domaincheck.Error whose message contains want
// and none of the test servers' addresses.
func wantFail(t *testing.T, what string, err error, want string, addrs ...string) {
	t.Helper()
	t.Logf("%s: %v", what, err)
	var ce *domaincheck.Error
	if !errors.As(err, &ce) {
		t.Errorf("%s: got %v (%T); want a *domaincheck.Error", what, err, err)
		return
	}
	if !strings.Contains(ce.Error(), want) {
		t.Errorf("%s: got %q; want it to say %q", what, ce.Error(), want)
	}
	for _, a := range append(addrs, "127.0.0.1") {
		if strings.Contains(ce.Error(), a) {
			t.Errorf("%s: %q names an address of ours (%s)", what, ce.Error(), a)
		}
	}
}

func TestCheckDNS(t *testing.T) {
	t.Parallel()
	s := dnstest.Start(t)
	s.Set(orgs.ChallengeLabel+"acme.test", "v=spf1 -all", " "+token+" ")
	s.Set(orgs.ChallengeLabel+"wrong.test", "NOT-IT", token+"X")
	c := domaincheck.Checker{Resolver: domaincheck.NewResolver(s.Addr)}
	ctx := context.Background()
	for _, d := range []string{"acme.test", "ACME.Test"} {
		if err := c.CheckDNS(ctx, d, token); err != nil {
			t.Errorf("%s: the record is there: %v", d, err)
		}
	}
	wantFail(t, "another token", c.CheckDNS(ctx, "wrong.test", token), "none of its 2 TXT records is the token", s.Addr)
	err := c.CheckDNS(ctx, "missing.test", token)
	wantFail(t, "no record", err, "there is no such TXT record", s.Addr)
	var dnsErr *net.DNSError
	if !errors.As(err, &dnsErr) || !dnsErr.IsNotFound {
		t.Errorf("the cause: %v; want a not-found *net.DNSError", err)
	}
	wantFail(t, "not a name", c.CheckDNS(ctx, "acme.test/x", token), "is not a domain name")

	// A resolver that is not there fails, naming none of our addresses.
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := pc.LocalAddr().String()
	_ = pc.Close()
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	wantFail(t, "no DNS server", domaincheck.Checker{Resolver: domaincheck.NewResolver(dead)}.CheckDNS(ctx, "acme.test", token),
		"the DNS lookup", dead)
}

func TestNewResolver(t *testing.T) {
	t.Parallel()
	if domaincheck.NewResolver("") != net.DefaultResolver {
		t.Error(`NewResolver("") is not the system's resolver`)
	}
	if r := domaincheck.NewResolver("127.0.0.1:53"); r == net.DefaultResolver || !r.PreferGo || r.Dial == nil {
		t.Errorf("NewResolver(addr) = %+v; want a pure-Go resolver dialling addr", r)
	}
}

// toServer makes the netguard client of policy p connect to srv whatever
// the URL's host (the domain "resolves" to srv's loopback address), the
// Host header staying the domain. Dials go through netguard's checks.
func toServer(srv *httptest.Server, p netguard.Policy) *http.Client {
	c := p.Client(netguard.Options{})
	c.Transport = rewrite{next: c.Transport, addr: srv.Listener.Addr().String()}
	return c
}

type rewrite struct {
	next http.RoundTripper
	addr string
}

func (rw rewrite) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Host, r.URL.Host = r.URL.Host, rw.addr
	return rw.next.RoundTrip(r)
}

func TestCheckHTTP(t *testing.T) {
	t.Parallel()
	var hits, elsewhere atomic.Int32
	file := orgs.ChallengePath + token
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		switch r.Host {
		case "acme.test", "redirected.test":
			switch {
			case r.URL.Path == file && r.Host == "redirected.test" && r.URL.Query().Get("moved") == "":
				http.Redirect(w, r, file+"?moved=1", http.StatusFound)
			case r.URL.Path == file:
				_, _ = w.Write([]byte(token + "\r\n"))
			default:
				http.NotFound(w, r)
			}
		case "elsewhere.test":
			http.Redirect(w, r, "http://evil.test"+r.URL.Path, http.StatusFound)
		case "evil.test":
			elsewhere.Add(1)
			_, _ = w.Write([]byte(token))
		case "port.test":
			http.Redirect(w, r, "http://port.test:8080"+r.URL.Path, http.StatusFound)
		case "loop.test":
			http.Redirect(w, r, r.URL.Path, http.StatusFound)
		case "wrong.test":
			_, _ = w.Write([]byte("something else"))
		case "broken.test":
			http.Error(w, "oops", http.StatusInternalServerError)
		case "big.test":
			_, _ = w.Write([]byte(strings.Repeat(token, 1000)))
		case "slow.test":
			<-r.Context().Done()
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	addr := srv.Listener.Addr().String()
	c := domaincheck.Checker{HTTP: toServer(srv, netguard.Policy{AllowLoopback: true})}
	ctx := context.Background()
	for _, d := range []string{"acme.test", "redirected.test"} {
		if err := c.CheckHTTP(ctx, d, token); err != nil {
			t.Errorf("%s: the file is there: %v", d, err)
		}
	}
	for _, tc := range []struct{ domain, token, want string }{
		{"acme.test", "OTHER", "the file was not found (404)"},
		{"missing.test", token, "the file was not found (404)"},
		{"broken.test", token, "it answered 500"},
		{"wrong.test", token, "the file's body is not the token"},
		{"big.test", token, "larger than"},
		{"elsewhere.test", token, "it redirects to another host (evil.test)"},
		{"port.test", token, "it redirects to port 8080"},
		{"loop.test", token, "it redirects more than 3 times"},
		{"acme.test/x", token, "is not a domain name"},
		{"acme.test:80", token, "is not a domain name"},
	} {
		wantFail(t, tc.domain, c.CheckHTTP(ctx, tc.domain, tc.token), tc.want, addr)
	}
	if n := elsewhere.Load(); n != 0 {
		t.Errorf("another host was called %d times", n)
	}
	// Bounded by the context.
	sctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	err := c.CheckHTTP(sctx, "slow.test", token)
	wantFail(t, "a server that does not answer", err, "no answer in time", addr)
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("the check took %v", d)
	}

	// Under the default egress policy the same server, at a loopback
	// address, is never called.
	before := hits.Load()
	guarded := domaincheck.Checker{HTTP: toServer(srv, netguard.Policy{})}
	err = guarded.CheckHTTP(ctx, "acme.test", token)
	wantFail(t, "an internal address", err, "not one the directory may call", addr)
	if !errors.Is(err, netguard.ErrForbidden) {
		t.Errorf("the cause: %v; want netguard.ErrForbidden", err)
	}
	if hits.Load() != before {
		t.Error("the refused address was called")
	}
	// Without a client the checker uses netguard's default policy.
	err = domaincheck.Checker{}.CheckHTTP(ctx, "localhost", token)
	if !errors.Is(err, netguard.ErrForbidden) {
		t.Errorf("localhost without a client: %v; want netguard.ErrForbidden", err)
	}
}
