package dpop_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/gatehouse-id/gatehouse/services/tokens/dpop"
)

// MemoryReplay refuses a proof seen before until it expires, across its
// generations; forgets it after; is bounded; and carries its live entries
// through a snapshot.
func TestMemoryReplay(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clock := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	m := &dpop.MemoryReplay{Now: func() time.Time { return clock }, Max: 3}
	until := clock.Add(65 * time.Second)
	if err := m.Use(ctx, "k1", "j1", until); err != nil {
		t.Fatal(err)
	}
	for _, step := range []time.Duration{0, 30 * time.Second, 34 * time.Second} { // up to 64 s later
		clock = clock.Add(step)
		if err := m.Use(ctx, "k1", "j1", until); !errors.Is(err, dpop.ErrReplayed) {
			t.Fatalf("%v after: %v; want ErrReplayed", clock, err)
		}
	}
	if err := m.Use(ctx, "k2", "j1", until); err != nil {
		t.Fatalf("the same jti of another key: %v", err)
	}
	clock = clock.Add(15 * time.Second) // past its until and a rotation (75 s)
	until = clock.Add(65 * time.Second)
	if err := m.Use(ctx, "k1", "j1", until); err != nil {
		t.Fatalf("after its until: %v; want it forgotten", err)
	}
	snapshot := m.Entries()
	if err := m.Use(ctx, "k3", "j1", clock.Add(time.Minute)); !errors.Is(err, dpop.ErrReplayFull) {
		t.Fatalf("past Max: %v; want ErrReplayFull", err)
	}
	next := &dpop.MemoryReplay{Now: func() time.Time { return clock }}
	next.Load(snapshot)
	if err := next.Use(ctx, "k1", "j1", until); !errors.Is(err, dpop.ErrReplayed) {
		t.Fatalf("a snapshot's entry in the next process: %v; want ErrReplayed", err)
	}
	clock = clock.Add(3 * dpop.DefaultReplayPeriod)
	if err := next.Use(ctx, "k1", "j1", clock.Add(time.Minute)); err != nil {
		t.Fatalf("long after: %v", err)
	}
}

// An entry made just before a rotation is still refused until its until.
func TestMemoryReplayAcrossRotation(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	start := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	clock := start
	m := &dpop.MemoryReplay{Now: func() time.Time { return clock }}
	_ = m.Use(ctx, "warm", "up", clock.Add(time.Minute)) // starts the first generation
	clock = start.Add(dpop.DefaultReplayPeriod - time.Second)
	until := clock.Add(65 * time.Second)
	if err := m.Use(ctx, "k", "j", until); err != nil {
		t.Fatal(err)
	}
	clock = until
	if err := m.Use(ctx, "k", "j", until); !errors.Is(err, dpop.ErrReplayed) {
		t.Fatalf("at its until, one rotation later: %v; want ErrReplayed", err)
	}
}
