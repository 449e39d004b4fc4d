package ratelimit

import (
	"context"
	"errors"
	"math"
	"sync"
	"time"

	"github.com/maypok86/otter/v2"
	"golang.org/x/time/rate"

	"github.com/gatehouse-id/gatehouse/pkg/cache"
)

// DefaultMaxKeys bounds Memory's key count: at roughly 200 bytes a key, a
// flood of distinct addresses costs at most tens of MiB.
const DefaultMaxKeys = 100_000

// Memory is an in-process Limiter with one token bucket per key, held in
// a bounded cache (pkg/cache): a key idle for as long as its bucket needs to
// refill completely is dropped (its bucket was full, exactly like a new
// one, so nothing is forgotten), and past MaxKeys the coldest keys are
// evicted — a burst of new keys evicts keys seen once before the keys of
// steady clients, never the whole table. An evicted key that returns gets a
// fresh, full bucket.
type Memory struct {
	limit   rate.Limit
	burst   int
	maxKeys int
	now     func() time.Time
	buckets *otter.Cache[string, *bucket]
}

// bucket is one key's: a decision reserves, may give back and then reads
// the tokens left, as one step.
type bucket struct {
	mu  sync.Mutex
	lim *rate.Limiter
}

var _ Limiter = (*Memory)(nil)

// MemoryOption configures NewMemory.
type MemoryOption func(*Memory)

// WithMaxKeys caps the number of keys held (default DefaultMaxKeys).
func WithMaxKeys(n int) MemoryOption { return func(m *Memory) { m.maxKeys = n } }

// WithClock replaces time.Now, for tests.
func WithClock(now func() time.Time) MemoryOption { return func(m *Memory) { m.now = now } }

// NewMemory allows perSecond requests per second per key on average, and
// bursts of up to burst requests.
func NewMemory(perSecond float64, burst int, opts ...MemoryOption) (*Memory, error) {
	if !(perSecond > 0) || math.IsInf(perSecond, 0) {
		return nil, errors.New("ratelimit: rate must be a positive, finite number per second")
	}
	if burst < 1 {
		return nil, errors.New("ratelimit: burst must be at least 1")
	}
	m := &Memory{limit: rate.Limit(perSecond), burst: burst, maxKeys: DefaultMaxKeys}
	for _, o := range opts {
		o(m)
	}
	if m.maxKeys < 1 {
		return nil, errors.New("ratelimit: max keys must be at least 1")
	}
	refill := time.Duration(float64(burst) / perSecond * float64(time.Second))
	m.buckets = cache.New(cache.Options[string, *bucket]{Name: "edge_rate_limit", Size: m.maxKeys,
		IdleFor: max(refill, time.Nanosecond), Now: m.now})
	if m.now == nil {
		m.now = time.Now
	}
	return m, nil
}

// Allow takes one token from key's bucket. It never returns an error.
func (m *Memory) Allow(_ context.Context, key string) (Decision, error) {
	now := m.now()
	b, ok := m.buckets.GetIfPresent(key)
	if !ok {
		// Two first requests of a key share the bucket one of them stores.
		b, _ = m.buckets.SetIfAbsent(key, &bucket{lim: rate.NewLimiter(m.limit, m.burst)})
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	lim := b.lim
	d := Decision{Limit: m.burst}
	r := lim.ReserveN(now, 1)
	if delay := r.DelayFrom(now); delay > 0 {
		// Denied: give the token back so waiting does not dig deeper.
		r.CancelAt(now)
		d.RetryAfter = delay
	} else {
		d.Allowed = true
	}
	tokens := lim.TokensAt(now)
	d.Remaining = max(int(math.Floor(tokens)), 0)
	d.ResetAfter = time.Duration((float64(m.burst) - tokens) / float64(m.limit) * float64(time.Second))
	return d, nil
}

// Len reports how many keys are held.
func (m *Memory) Len() int {
	m.buckets.CleanUp()
	return m.buckets.EstimatedSize()
}
