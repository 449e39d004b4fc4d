package ratelimit

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

type clock struct{ t time.Time }

func (c *clock) now() time.Time          { return c.t }
func (c *clock) advance(d time.Duration) { c.t = c.t.Add(d) }

func newMemory(t *testing.T, perSecond float64, burst int, opts ...MemoryOption) (*Memory, *clock) {
	t.Helper()
	c := &clock{t: time.Unix(1_800_000_000, 0)}
	m, err := NewMemory(perSecond, burst, append([]MemoryOption{WithClock(c.now)}, opts...)...)
	if err != nil {
		t.Fatalf("NewMemory: %v", err)
	}
	return m, c
}

func allow(t *testing.T, l Limiter, key string) Decision {
	t.Helper()
	d, err := l.Allow(context.Background(), key)
	if err != nil {
		t.Fatalf("Allow(%q): %v", key, err)
	}
	return d
}

func TestMemoryBurstThenDeny(t *testing.T) {
	m, c := newMemory(t, 2, 3)
	for i, wantRemaining := range []int{2, 1, 0} {
		d := allow(t, m, "a")
		if !d.Allowed || d.Remaining != wantRemaining || d.Limit != 3 {
			t.Fatalf("request %d: got %+v; want allowed, remaining %d, limit 3", i, d, wantRemaining)
		}
	}
	d := allow(t, m, "a")
	if d.Allowed || d.Remaining != 0 || d.RetryAfter != 500*time.Millisecond {
		t.Fatalf("over burst: got %+v; want denied, retry after 500ms", d)
	}
	if d.ResetAfter != 1500*time.Millisecond {
		t.Fatalf("got ResetAfter %v; want 1.5s for 3 tokens at 2/s", d.ResetAfter)
	}
	if other := allow(t, m, "b"); !other.Allowed {
		t.Fatalf("another key was limited: %+v", other)
	}

	// A denial does not consume: after RetryAfter exactly one passes.
	c.advance(d.RetryAfter)
	if d := allow(t, m, "a"); !d.Allowed {
		t.Fatalf("after RetryAfter: got %+v; want allowed", d)
	}
	if d := allow(t, m, "a"); d.Allowed {
		t.Fatalf("second after RetryAfter: got %+v; want denied", d)
	}
}

func TestMemoryEvictsRefilledKeys(t *testing.T) {
	m, c := newMemory(t, 1, 2) // refills completely in 2s
	allow(t, m, "a")
	allow(t, m, "a")
	allow(t, m, "b")
	c.advance(time.Second)
	allow(t, m, "c")
	if got := m.Len(); got != 3 {
		t.Fatalf("after 1s: got %d keys; want 3 (buckets not yet full)", got)
	}
	// a has refilled one token only: it must still be limited.
	if d := allow(t, m, "a"); !d.Allowed {
		t.Fatalf("a after 1s: got %+v; want one token", d)
	}
	if d := allow(t, m, "a"); d.Allowed {
		t.Fatalf("a after 1s, second: got %+v; want denied (key must not be forgotten early)", d)
	}
	c.advance(2 * time.Second)
	allow(t, m, "d")
	if got := m.Len(); got != 1 {
		t.Fatalf("after every bucket refilled: got %d keys; want 1", got)
	}
}

func TestMemoryMaxKeysKeepsSteadyClients(t *testing.T) {
	m, _ := newMemory(t, 1, 1, WithMaxKeys(100))
	allow(t, m, "a")
	// A flood of new keys, ten times the bound, while a keeps asking: a's
	// empty bucket must not be forgotten (that would hand it a full one).
	for i := range 1000 {
		allow(t, m, "flood-"+strconv.Itoa(i))
		if i%10 == 0 {
			if d := allow(t, m, "a"); d.Allowed {
				t.Fatalf("a during the flood (key %d): got %+v; want still denied", i, d)
			}
		}
	}
	if got := m.Len(); got > 100 {
		t.Fatalf("got %d keys; want at most the cap 100", got)
	}
	if d := allow(t, m, "flood-0"); !d.Allowed {
		t.Fatalf("an evicted key: got %+v; want a fresh bucket", d)
	}
}

func TestMemoryConcurrentCallersShareTheBurst(t *testing.T) {
	m, _ := newMemory(t, 1, 10)
	var allowed atomic.Int32
	var wg sync.WaitGroup
	for range 100 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if d, _ := m.Allow(context.Background(), "k"); d.Allowed {
				allowed.Add(1)
			}
		}()
	}
	wg.Wait()
	if got := allowed.Load(); got != 10 {
		t.Fatalf("got %d allowed; want exactly the burst 10", got)
	}
}

func TestNewMemoryRejectsBadArguments(t *testing.T) {
	cases := []struct {
		rate  float64
		burst int
		opts  []MemoryOption
	}{
		{0, 1, nil}, {-1, 1, nil}, {1, 0, nil}, {1, 1, []MemoryOption{WithMaxKeys(0)}},
	}
	for _, c := range cases {
		if _, err := NewMemory(c.rate, c.burst, c.opts...); err == nil {
			t.Errorf("NewMemory(%v, %d): got nil error", c.rate, c.burst)
		}
	}
}
