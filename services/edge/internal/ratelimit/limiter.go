package ratelimit

import (
	"context"
	"time"
)

// Limiter decides whether one more request under key may pass now.
// An error means no decision could be made; callers fail open.
type Limiter interface {
	Allow(ctx context.Context, key string) (Decision, error)
}

// Decision is the outcome of one Allow call.
type Decision struct {
	// Allowed is whether the request may pass.
	Allowed bool
	// Limit is the burst: how many requests may pass at once from a full
	// bucket. Zero means unknown (the limiter failed open), and the router
	// then sends no RateLimit-* headers.
	Limit int
	// Remaining is how many more requests may pass right now.
	Remaining int
	// RetryAfter is, when not Allowed, how long until one request may pass.
	RetryAfter time.Duration
	// ResetAfter is how long until the bucket is full again.
	ResetAfter time.Duration
}
