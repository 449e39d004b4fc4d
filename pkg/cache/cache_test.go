package cache

import (
	"fmt"
	"testing"
	"time"
)

// Entries live until their own expiry, counted from the given clock; hits
// and misses are counted under the cache's name.
func TestExpiryAndCounts(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 28, 9, 0, 0, 0, time.UTC) // not the real time: entries live relative to it
	name := fmt.Sprintf("test_expiry_%p", &now)          // one per run: -count runs share the registry
	c := New(Options[string, time.Time]{Name: name, Size: 10, Now: func() time.Time { return now },
		ExpiresAt: func(_ string, exp time.Time) time.Time { return exp }})
	c.Set("long", now.Add(time.Hour))
	c.Set("gone", now.Add(-time.Second))
	c.Set("forever", time.Time{})
	if _, ok := c.GetIfPresent("long"); !ok {
		t.Fatal("an entry with an hour left is gone")
	}
	if _, ok := c.GetIfPresent("forever"); !ok {
		t.Fatal("an entry without expiry is gone")
	}
	if _, ok := c.GetIfPresent("gone"); ok {
		t.Fatal("an expired entry is served")
	}
	s := Snapshot()[name]
	if s.Hits != 2 || s.Misses != 1 {
		t.Fatalf("hits %d, misses %d; want 2 and 1", s.Hits, s.Misses)
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
