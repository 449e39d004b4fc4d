package domaincheck_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/gatehouse-id/gatehouse/pkg/netguard"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/orgs"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/orgs/domaincheck"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/orgs/domaincheck/dnstest"
)

func TestCheckDNS(t *testing.T) {
	t.Parallel()
	s := dnstest.Start(t)
	s.Set(orgs.ChallengeLabel+"acme.test", "other", "TOKEN123")
	s.Set(orgs.ChallengeLabel+"wrong.test", "NOT-IT")
	c := domaincheck.Checker{Resolver: domaincheck.NewResolver(s.Addr)}
	ctx := context.Background()
	if err := c.CheckDNS(ctx, "acme.test", "TOKEN123"); err != nil {
		t.Fatalf("the record is there: %v", err)
	}
	for _, d := range []string{"wrong.test", "missing.test"} {
		if err := c.CheckDNS(ctx, d, "TOKEN123"); err == nil {
			t.Errorf("%s: passed without the token", d)
		}
	}
}

// toServer is a client whose every connection goes to srv (a domain that
// resolves nowhere stands for a public one).
func toServer(srv *httptest.Server) *http.Client {
	addr := srv.Listener.Addr().String()
	return &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, network, addr)
	}}}
}

func TestCheckHTTP(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.Host == "acme.test" && r.URL.Path == orgs.ChallengePath+"TOKEN123":
			_, _ = w.Write([]byte("TOKEN123\n"))
		case r.Host == "moved.test":
			http.Redirect(w, r, "http://evil.test"+r.URL.Path, http.StatusFound)
		case r.Host == "wrong.test":
			_, _ = w.Write([]byte("something else"))
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	c := domaincheck.Checker{HTTP: toServer(srv)}
	ctx := context.Background()
	if err := c.CheckHTTP(ctx, "acme.test", "TOKEN123"); err != nil {
		t.Fatalf("the file is there: %v", err)
	}
	for _, d := range []string{"wrong.test", "missing.test", "moved.test"} {
		if err := c.CheckHTTP(ctx, d, "TOKEN123"); err == nil {
			t.Errorf("%s: passed without the token", d)
		}
	}
	// Through the egress policy a domain naming an internal address is
	// never called.
	guarded := domaincheck.Checker{HTTP: netguard.Policy{}.Client(netguard.Options{})}
	if err := guarded.CheckHTTP(ctx, "localhost", "TOKEN123"); !errors.Is(err, netguard.ErrForbidden) {
		t.Fatalf("a loopback domain: %v; want refused by the egress policy", err)
	}
}
