// Package ratelimit decides whether a request under a key (the router keys
// each rate-limit class by client address, OAuth client or bearer token)
// may pass. Edge has one limiter per class. Memory keeps per-key token buckets
// (golang.org/x/time/rate) in process with bounded memory, for the embedded
// mode and a single edge replica. Redis uses GCRA
// (github.com/go-redis/redis_rate/v10) so every edge replica shares one budget
// per key. Both report a Decision carrying what the RateLimit-* and
// Retry-After headers need.
//
// When Redis errors or does not answer within RedisTimeout, Redis.Fallback
// decides: by default an in-process Memory limiter per replica (each
// replica then allows the full budget, so N replicas allow N times it), or
// nothing (GATEHOUSE_RATE_LIMIT_FALLBACK=open: every request allowed). The
// switch is logged once each way, reported by Degraded (the
// gatehouse.edge.ratelimit.fallback gauge and /readyz's details); for
// RedisBackoff after a failure Redis is not asked at all, so an outage
// costs one slow request per interval, not one per request. Limiters made
// with WithLimit (edge's other classes) share that state with their
// original, so the cost does not grow with the number of budgets. An outage of
// the limiter's store must not turn into an outage of login and token
// issuance, nor silently into no limit at all.
package ratelimit
