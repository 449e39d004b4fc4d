package cache

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"
)

var runs atomic.Int64

// Entries live until their own expiry, counted from the given clock; hits
// and misses are counted under the cache's name.
func TestExpiryAndCounts(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 28, 9, 0, 0, 0, time.UTC) // not the real time: entries live relative to it
	name := fmt.Sprintf("test_expiry_%d", runs.Add(1))   // one per run: -count runs share the registry
	c := New(Options[string, time.Time]{Name: name, Size: 10, Now: func() time.Time { return now },
		ExpiresAt: func(_ string, exp time.Time) time.Time { return exp }})
	c.Set("long", now.Add(time.Hour))
	c.Set("short", now.Add(time.Second))
	c.Set("forever", time.Time{})
	if _, ok := c.GetIfPresent("short"); !ok {
		t.Fatal("an entry with a second left is gone")
	}
	now = now.Add(time.Second) // the given clock, not the real one, expires entries
	if _, ok := c.GetIfPresent("long"); !ok {
		t.Fatal("an entry with an hour left is gone")
	}
	if _, ok := c.GetIfPresent("forever"); !ok {
		t.Fatal("an entry without expiry is gone")
	}
	if _, ok := c.GetIfPresent("short"); ok {
		t.Fatal("an expired entry is served")
	}
	s := Snapshot()[name]
	if s.Hits != 3 || s.Misses != 1 {
		t.Fatalf("hits %d, misses %d; want 3 and 1", s.Hits, s.Misses)
	}
}

// An entry unread for IdleFor is dropped; each read keeps it.
func TestIdleFor(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 28, 9, 0, 0, 0, time.UTC)
	c := New(Options[string, int]{Name: "test_idle", Size: 10, IdleFor: 10 * time.Second, Now: func() time.Time { return now }})
	c.Set("read", 1)
	c.Set("unread", 2)
	for range 3 {
		now = now.Add(5 * time.Second)
		if _, ok := c.GetIfPresent("read"); !ok {
			t.Fatalf("an entry read every 5 s is gone at %v", now)
		}
	}
	if _, ok := c.GetIfPresent("unread"); ok {
		t.Fatal("an entry unread for 15 s is served")
	}
}

// The size bound evicts some entries, never all of them at once.
func TestBoundedWithoutCliff(t *testing.T) {
	t.Parallel()
	c := New(Options[int, int]{Name: "test_bound", Size: 100})
	for i := range 1000 {
		c.Set(i, i)
	}
	c.CleanUp()
	if n := c.EstimatedSize(); n > 100 || n < 50 {
		t.Fatalf("%d entries after 1000 distinct keys; want at most 100, and most of them kept", n)
	}
}
