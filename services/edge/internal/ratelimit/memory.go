package ratelimit

import (
	"container/list"
	"context"
	"errors"
	"math"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// DefaultMaxKeys bounds Memory's key count: at roughly 200 bytes a key, a
// flood of distinct addresses costs at most tens of MiB.
const DefaultMaxKeys = 100_000

// Memory is an in-process Limiter with one token bucket per key.
//
// Memory stays bounded without a background goroutine: a key idle for as
// long as its bucket needs to refill completely is dropped on the next Allow
// (its bucket was full, exactly like a new one, so nothing is forgotten), and
// past MaxKeys the least recently used key is dropped (that key gets a fresh,
// full bucket when it returns).
type Memory struct {
	limit   rate.Limit
	burst   int
	idle    time.Duration
	maxKeys int
	now     func() time.Time

	mu      sync.Mutex
	entries map[string]*list.Element // of *entry
	lru     *list.List               // front: most recently used
}

var _ Limiter = (*Memory)(nil)

type entry struct {
	key      string
	lim      *rate.Limiter
	lastSeen time.Time
}

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
	m := &Memory{
		limit:   rate.Limit(perSecond),
		burst:   burst,
		idle:    time.Duration(float64(burst) / perSecond * float64(time.Second)),
		maxKeys: DefaultMaxKeys,
		now:     time.Now,
		entries: map[string]*list.Element{},
		lru:     list.New(),
	}
	for _, o := range opts {
		o(m)
	}
	if m.maxKeys < 1 {
		return nil, errors.New("ratelimit: max keys must be at least 1")
	}
	return m, nil
}

// Allow takes one token from key's bucket. It never returns an error.
func (m *Memory) Allow(_ context.Context, key string) (Decision, error) {
	now := m.now()
	m.mu.Lock()
	defer m.mu.Unlock()

	m.evictIdle(now)
	e := m.get(key, now)
	e.lastSeen = now

	d := Decision{Limit: m.burst}
	r := e.lim.ReserveN(now, 1)
	if delay := r.DelayFrom(now); delay > 0 {
		// Denied: give the token back so waiting does not dig deeper.
		r.CancelAt(now)
		d.RetryAfter = delay
	} else {
		d.Allowed = true
	}
	tokens := e.lim.TokensAt(now)
	d.Remaining = max(int(math.Floor(tokens)), 0)
	d.ResetAfter = time.Duration((float64(m.burst) - tokens) / float64(m.limit) * float64(time.Second))
	return d, nil
}

// Len reports how many keys are held.
func (m *Memory) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.lru.Len()
}

func (m *Memory) get(key string, now time.Time) *entry {
	if el, ok := m.entries[key]; ok {
		m.lru.MoveToFront(el)
		return el.Value.(*entry)
	}
	for m.lru.Len() >= m.maxKeys {
		m.remove(m.lru.Back())
	}
	e := &entry{key: key, lim: rate.NewLimiter(m.limit, m.burst), lastSeen: now}
	m.entries[key] = m.lru.PushFront(e)
	return e
}

// evictIdle drops keys from the LRU end whose buckets have refilled. Each
// call does work proportional to the keys it drops, so the cost is amortized
// over the Allow calls that created them.
func (m *Memory) evictIdle(now time.Time) {
	for el := m.lru.Back(); el != nil; el = m.lru.Back() {
		if now.Sub(el.Value.(*entry).lastSeen) < m.idle {
			return
		}
		m.remove(el)
	}
}

func (m *Memory) remove(el *list.Element) {
	delete(m.entries, el.Value.(*entry).key)
	m.lru.Remove(el)
}
