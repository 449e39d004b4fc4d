package dpop

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// ReplayFunc adapts a function to ReplayStore.
type ReplayFunc func(ctx context.Context, jkt, jti string, until time.Time) error

// Use calls f.
func (f ReplayFunc) Use(ctx context.Context, jkt, jti string, until time.Time) error {
	return f(ctx, jkt, jti, until)
}

// RedisReplay remembers proofs in Redis, which every replica shares (the
// distributed mode): one SET NX per proof, expiring when the proof could no
// longer be accepted anyway.
type RedisReplay struct {
	Client redis.UniversalClient
	Prefix string // key prefix, e.g. "gatehouse:dpop:"
}

// Use implements ReplayStore.
func (r *RedisReplay) Use(ctx context.Context, jkt, jti string, until time.Time) error {
	ttl := time.Until(until)
	if ttl < time.Second {
		ttl = time.Second
	}
	ok, err := r.Client.SetNX(ctx, r.Prefix+jkt+":"+jti, 1, ttl).Result()
	if err != nil {
		return fmt.Errorf("dpop replay store: %w", err)
	}
	if !ok {
		return ErrReplayed
	}
	return nil
}
