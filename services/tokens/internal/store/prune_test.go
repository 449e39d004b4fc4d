package store

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gatehouse-id/gatehouse/pkg/db"
	"github.com/gatehouse-id/gatehouse/services/tokens/internal/assertion"
)

// Expired access tokens and used assertion ids go; live ones stay.
func TestPruneStepsAccessTokensAndAssertionIDs(t *testing.T) {
	s := openSQLite(t)
	ctx := context.Background()
	now := time.Now().UTC().Truncate(time.Second)
	live := record("live")
	dead := NewAccessToken("dead", []byte("hash-dead"), "client", "user", "org", nil, nil, nil, now.Add(-2*time.Hour), now.Add(-time.Hour))
	for _, a := range []*AccessToken{live, dead} {
		if err := s.InsertAccessToken(ctx, nil, a); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Use(ctx, "iss", "old", now.Add(-time.Minute)); err != nil {
		t.Fatal(err)
	}
	if err := s.Use(ctx, "iss", "new", now.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	p := &db.Pruner{DB: s.DB, Service: "tokens", Steps: PruneSteps(time.Minute)}
	r, err := p.RunOnce(ctx, now)
	if err != nil {
		t.Fatal(err)
	}
	if r.Deleted["access_tokens"] != 1 || r.Deleted["assertion_jtis"] != 1 {
		t.Fatalf("deleted %v; want one access token and one assertion id", r.Deleted)
	}
	if _, err := s.AccessTokenByHash(ctx, []byte("hash-live")); err != nil {
		t.Fatalf("live token pruned: %v", err)
	}
	// The unexpired jti still blocks a replay.
	if err := s.Use(ctx, "iss", "new", now.Add(time.Minute)); err == nil {
		t.Fatal("a live assertion id was pruned: its replay was accepted")
	}
}

// An expired assertion id that lingers until pruned no longer blocks its
// reuse, but of parallel uses exactly one takes it over: the others are
// replays (the update of the lingering entry matched for them all).
func TestExpiredAssertionIDIsTakenOverOnce(t *testing.T) {
	s := openSQLite(t)
	ctx := context.Background()
	now := time.Now().UTC().Truncate(time.Second)
	for round := range 20 {
		jti := fmt.Sprintf("lingering-%d", round)
		if err := s.Use(ctx, "iss", jti, now.Add(-time.Minute)); err != nil {
			t.Fatal(err)
		}
		var ok atomic.Int32
		var wg sync.WaitGroup
		for range 8 {
			wg.Go(func() {
				err := s.Use(ctx, "iss", jti, now.Add(time.Minute))
				switch {
				case err == nil:
					ok.Add(1)
				case !errors.Is(err, assertion.ErrReplayed):
					t.Error(err)
				}
			})
		}
		wg.Wait()
		if n := ok.Load(); n != 1 {
			t.Fatalf("round %d: %d parallel uses of an expired assertion id succeeded; want 1", round, n)
		}
	}
}
