package ratelimit

import (
	"sync"
	"time"

	"github.com/maypok86/otter/v2"

	"github.com/gatehouse-id/gatehouse/pkg/cache"
)

// A key asked for often takes its permits from Redis in leases: one
// round trip takes up to size permits from the shared budget (GCRA's
// AllowAtMost), and the next requests of that key on this replica use
// them without asking. Permits are taken before they are used, so the
// replicas together never let more pass than the budget; a lease lapses
// after leaseTTL, and its unused permits are lost (the limit is then
// stricter than configured by at most one lease per replica and key).
// A lease is sized to the key's demand: it doubles while leases run out
// within leaseTTL, up to a tenth of the burst, and halves when one lapses
// unused, so a key seen once a second asks Redis every time, exactly as
// without leases, and a budget with a burst under 20 is never leased.
// A refusal is remembered until its RetryAfter: no permit can come back
// sooner, so a key flooding past its limit does not reach Redis either.
const (
	leaseTTL = 100 * time.Millisecond
	// maxLeaseKeys bounds the keys whose demand is remembered: past it the
	// coldest are forgotten, and a key forgotten or idle for leaseIdle
	// starts again at one permit (Redis still decides; only round trips
	// are saved).
	maxLeaseKeys = 10000
	leaseIdle    = time.Minute
)

type leases struct {
	max int        // permits per lease at most
	mu  sync.Mutex // over every lease's fields
	m   *otter.Cache[string, *lease]
}

type lease struct {
	denied time.Time // refused until then (Redis's RetryAfter)
	left   int       // permits taken and not yet used
	until  time.Time // when they lapse
	asked  time.Time // when Redis last answered for the key
	size   int       // permits the next round trip asks for
	taking bool      // a lease (size > 1) is being asked for
	d      Decision  // Redis's answer when the lease was taken
}

func newLeases(burst int) *leases {
	return &leases{max: max(1, burst/10),
		m: cache.New(cache.Options[string, *lease]{Name: "edge_rate_limit_leases", Size: maxLeaseKeys, IdleFor: leaseIdle})}
}

// take uses a permit of key's lease, if one is left and current, or
// repeats a refusal that still holds.
func (ls *leases) take(key string, now time.Time) (Decision, bool) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	l, _ := ls.m.GetIfPresent(key)
	if l == nil {
		return Decision{}, false
	}
	if now.Before(l.denied) {
		d := l.d
		d.RetryAfter = l.denied.Sub(now)
		d.ResetAfter = max(0, d.ResetAfter-now.Sub(l.asked))
		return d, true
	}
	if l.left == 0 {
		return Decision{}, false
	}
	if !now.Before(l.until) {
		l.left, l.size = 0, max(1, l.size/2) // lapsed unused: ask for fewer
		return Decision{}, false
	}
	l.left--
	d := l.d
	d.Remaining += l.left
	return d, true
}

// size is how many permits the next round trip for key asks for. While
// one lease is being taken for key, the key's other requests ask for
// their own permit only: concurrent leases would take the budget many
// times over.
func (ls *leases) size(key string, now time.Time) int {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	l, _ := ls.m.GetIfPresent(key)
	if l == nil || l.taking {
		return 1
	}
	if now.Sub(l.asked) < leaseTTL {
		l.size = min(ls.max, l.size*2) // the last lease ran out in time
	}
	l.taking = l.size > 1
	return l.size
}

// store keeps the answer of a round trip for key that asked for asked
// permits: the extra ones beyond the request's own, a refusal, and when it
// was asked.
func (ls *leases) store(key string, asked, extra int, d Decision, now time.Time) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	l, _ := ls.m.GetIfPresent(key)
	if l == nil {
		l = &lease{size: 1}
		ls.m.Set(key, l)
	}
	if asked > 1 {
		l.taking = false
	}
	if !now.Before(l.until) {
		l.left = 0
	}
	l.asked, l.d = now, d
	l.left, l.until = l.left+max(0, extra), now.Add(leaseTTL)
	l.denied = time.Time{}
	if !d.Allowed {
		l.denied = now.Add(d.RetryAfter)
	}
}

// abort ends a lease request for key that got no answer.
func (ls *leases) abort(key string) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if l, _ := ls.m.GetIfPresent(key); l != nil {
		l.taking = false
	}
}
