package backchannel_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gatehouse-id/gatehouse/pkg/db"
	"github.com/gatehouse-id/gatehouse/pkg/netguard"
	"github.com/gatehouse-id/gatehouse/pkg/testutil/dbtest"
	"github.com/gatehouse-id/gatehouse/services/tokens/internal/backchannel"
)

// A URI at an address the policy refuses is never called: loopback
// without AllowLoopback, a metadata address whatever the policy. The
// logout is retried (the operator may allow the address), and the log
// says why without the URI.
func TestOutboxNetguard(t *testing.T) {
	dbtest.Run(t, func(t *testing.T, d db.Dialect) {
		e := newEnv(t, d)
		r := newReceiver(t)
		e.dir.put("loopback", r.URL+"/bc")
		e.dir.put("metadata", "http://169.254.169.254/latest/meta-data/")
		e.outbox = e.newOutbox(e.store, backchannel.NewHTTPClient(netguard.Policy{}))
		e.logout(t, "sid", "loopback", "metadata")
		e.deliver(t)
		if n := len(r.requests()); n != 0 {
			t.Fatalf("the loopback receiver was called %d times under a policy refusing loopback", n)
		}
		if p := e.pending(t); len(p) != 2 {
			t.Fatalf("outbox %v; want both kept for a retry", p)
		}
		log := e.log.String()
		if strings.Count(log, `"reason":"address not allowed (netguard)"`) != 2 || strings.Contains(log, "169.254") || strings.Contains(log, r.URL) {
			t.Fatalf("want two refusals naming the rule, not the address:\n%s", log)
		}
		// Loopback allowed: the receiver gets its logout; the metadata
		// address stays refused.
		e.outbox = e.newOutbox(e.store, backchannel.NewHTTPClient(netguard.Policy{AllowLoopback: true, AllowPrivate: true}))
		e.clock.Advance(time.Second)
		e.deliver(t)
		if n := len(r.requests()); n != 1 {
			t.Fatalf("loopback allowed: %d requests; want 1", n)
		}
		if p := e.pending(t); len(p) != 1 || p[0].ClientID != "metadata" {
			t.Fatalf("outbox %v; want the metadata address's logout still failing", p)
		}
	})
}

// A receiver slower than the timeout is a failed try, retried; the
// round does not wait for it.
func TestOutboxSlowReceiver(t *testing.T) {
	dbtest.Run(t, func(t *testing.T, d db.Dialect) {
		e := newEnv(t, d)
		stop := make(chan struct{})
		slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			select {
			case <-req.Context().Done():
			case <-stop:
			}
		}))
		t.Cleanup(slow.Close)
		t.Cleanup(func() { close(stop) })
		e.dir.put("slow", slow.URL)
		c := backchannel.NewHTTPClient(netguard.Policy{AllowLoopback: true})
		c.Timeout = 200 * time.Millisecond // backchannel.Timeout in production
		e.outbox = e.newOutbox(e.store, c)
		e.logout(t, "sid", "slow")
		start := time.Now()
		if next := e.deliver(t); next.IsZero() {
			t.Fatal("the slow receiver's logout is not scheduled again")
		}
		if took := time.Since(start); took > 5*time.Second {
			t.Fatalf("the round took %v; want about the timeout", took)
		}
		if log := e.log.String(); !strings.Contains(log, `"reason":"timeout"`) {
			t.Fatalf("want a timeout logged:\n%s", log)
		}
	})
}

// The wait after the nth failure is 1 s doubling up to an hour, with
// jitter over its upper half.
func TestBackoff(t *testing.T) {
	for n := 1; n <= 40; n++ {
		hi := min(time.Second<<min(n-1, 20), backchannel.MaxBackoff)
		for range 50 {
			if got := backchannel.Backoff(n); got < hi/2 || got > hi {
				t.Fatalf("Backoff(%d) = %v; want between %v and %v", n, got, hi/2, hi)
			}
		}
	}
	if hi := backchannel.Backoff(13); hi < 30*time.Minute {
		t.Fatalf("Backoff(13) = %v; want the cap's range", hi)
	}
}
