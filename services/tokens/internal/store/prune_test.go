package store

import (
	"context"
	"testing"
	"time"

	"github.com/gatehouse-id/gatehouse/pkg/db"
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
