package ratelimit

import (
	"testing"
	"time"
)

// One lease at a time per key: while one is being taken, the key's other
// requests ask for their own permit only; a failed round trip ends it.
func TestLeaseOneAtATime(t *testing.T) {
	t.Parallel()
	ls := newLeases(1000) // leases of up to 100
	now := time.Unix(1000, 0)
	allowed := Decision{Allowed: true, Limit: 1000, Remaining: 900}
	if n := ls.size("k", now); n != 1 {
		t.Fatalf("first ask: %d permits; want 1", n)
	}
	ls.store("k", 1, 0, allowed, now)
	now = now.Add(time.Millisecond)
	n := ls.size("k", now) // asked again within leaseTTL: grows
	if n != 2 {
		t.Fatalf("second ask: %d permits; want 2", n)
	}
	if m := ls.size("k", now); m != 1 {
		t.Fatalf("ask while a lease is being taken: %d permits; want 1", m)
	}
	ls.store("k", n, n-1, allowed, now)
	if _, ok := ls.take("k", now); !ok {
		t.Fatal("the lease's extra permit was not used")
	}
	if _, ok := ls.take("k", now); ok {
		t.Fatal("a permit beyond the lease was used")
	}
	n = ls.size("k", now)
	if n != 4 {
		t.Fatalf("third ask: %d permits; want 4", n)
	}
	ls.abort("k")
	if m := ls.size("k", now); m != 8 {
		t.Fatalf("ask after a failed lease: %d permits; want 8 (no longer taking)", m)
	}

	// A refusal holds until its RetryAfter, then Redis is asked again.
	ls.store("k", 8, -1, Decision{Limit: 1000, RetryAfter: 50 * time.Millisecond}, now)
	if d, ok := ls.take("k", now.Add(10*time.Millisecond)); !ok || d.Allowed || d.RetryAfter != 40*time.Millisecond {
		t.Fatalf("within RetryAfter: %+v, %v; want a refusal with 40ms left", d, ok)
	}
	if _, ok := ls.take("k", now.Add(50*time.Millisecond)); ok {
		t.Fatal("after RetryAfter the refusal still held")
	}

	// A lease that lapses unused halves the next one.
	ls.store("j", 1, 0, allowed, now)
	ls.size("j", now)
	ls.store("j", 2, 1, allowed, now)
	later := now.Add(2 * leaseTTL)
	if _, ok := ls.take("j", later); ok {
		t.Fatal("a lapsed permit was used")
	}
	if n := ls.size("j", later); n != 1 {
		t.Fatalf("after a lapsed lease: %d permits; want 1", n)
	}
}
