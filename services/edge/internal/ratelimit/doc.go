// Package ratelimit decides whether a request under a key (edge uses the
// client address) may pass. Memory keeps per-key token buckets
// (golang.org/x/time/rate) in process with bounded memory, for the embedded
// mode and a single edge replica. Redis uses GCRA
// (github.com/go-redis/redis_rate/v10) so every edge replica shares one budget
// per key. Both report a Decision carrying what the RateLimit-* and
// Retry-After headers need.
//
// Redis fails open: when Redis errors or does not answer within
// RedisTimeout, the request is allowed and a warning logged (at most every
// few seconds); for RedisBackoff after a failure Redis is not asked at all, so
// an outage costs one slow request per interval, not one per request. Rate limiting protects capacity; an
// outage of the limiter's store must not turn into an outage of login and
// token issuance, which have their own per-user and per-client throttles.
package ratelimit
