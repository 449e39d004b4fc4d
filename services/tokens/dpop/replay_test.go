package dpop_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/gatehouse-id/gatehouse/pkg/testutil"
	"github.com/gatehouse-id/gatehouse/services/tokens/dpop"
)

// TestRedisReplay: a proof's jti is accepted once per key across every
// replica sharing Redis, however many ask at once; another key's same jti
// is another proof.
func TestRedisReplay(t *testing.T) {
	t.Parallel()
	client, prefix := testutil.Redis(t)
	replicas := []*dpop.RedisReplay{{Client: client, Prefix: prefix}, {Client: client, Prefix: prefix}}
	ctx := context.Background()
	until := time.Now().Add(time.Minute)
	var wg sync.WaitGroup
	var mu sync.Mutex
	accepted := 0
	for i := range 16 {
		wg.Go(func() {
			err := replicas[i%2].Use(ctx, "jkt-1", "jti-1", until)
			switch {
			case err == nil:
				mu.Lock()
				accepted++
				mu.Unlock()
			case !errors.Is(err, dpop.ErrReplayed):
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if accepted != 1 {
		t.Fatalf("%d of 16 parallel uses accepted; want 1", accepted)
	}
	if err := replicas[1].Use(ctx, "jkt-2", "jti-1", until); err != nil {
		t.Fatalf("another key's jti: %v", err)
	}
	ttl, err := client.TTL(ctx, prefix+"jkt-1:jti-1").Result()
	if err != nil || ttl <= 0 || ttl > time.Minute {
		t.Fatalf("the entry expires in %v (%v); want within the proof's window", ttl, err)
	}
}
