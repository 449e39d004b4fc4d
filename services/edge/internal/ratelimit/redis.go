package ratelimit

import (
	"context"
	"errors"
	"log/slog"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"
)

// ClientOptions are the Redis client options of GATEHOUSE_REDIS_URL for the
// limiter: a round trip, and a connection attempt, give up after
// RedisTimeout whatever the socket does (go-redis otherwise waits for its
// own 3 s read and 5 s dial timeouts, ignoring the call's deadline, so a
// frozen Redis held a request for 5 s), and a failed command is not
// retried (the fallback decides at once). Timeouts and retries named in
// the URL win.
func ClientOptions(rawURL string) (*redis.Options, error) {
	opts, err := redis.ParseURL(rawURL)
	if err != nil {
		return nil, err
	}
	q := url.Values{}
	if u, err := url.Parse(rawURL); err == nil {
		q = u.Query()
	}
	if opts.ClientName == "" {
		opts.ClientName = "gatehouse-edge" // CLIENT LIST names the holder
	}
	opts.ContextTimeoutEnabled = true
	if !q.Has("dial_timeout") {
		opts.DialTimeout = RedisTimeout
	}
	if !q.Has("read_timeout") {
		opts.ReadTimeout = RedisTimeout
	}
	if !q.Has("write_timeout") {
		opts.WriteTimeout = RedisTimeout
	}
	if !q.Has("max_retries") {
		opts.MaxRetries = -1 // none
	}
	if !q.Has("pool_timeout") {
		opts.PoolTimeout = RedisTimeout
	}
	opts.DialerRetries = 1
	return opts, nil
}

// RedisTimeout bounds one Redis round trip: a slow or unreachable Redis must
// not add more than this to a request before the limiter fails open.
const RedisTimeout = 250 * time.Millisecond

// RedisBackoff is how long Redis is not asked after a failure: during an
// outage only one request per interval pays RedisTimeout, the others fail
// open at once.
const RedisBackoff = time.Second

// Redis is a Limiter shared by every edge replica, using GCRA in Redis.
// A busy key takes its permits in leases (see leases), so it costs one
// Redis round trip per lease rather than per request.
type Redis struct {
	// Fallback decides while Redis cannot (an in-process limiter by
	// default, per replica); nil allows every request (fail open).
	Fallback Limiter
	limiter  *redis_rate.Limiter
	limit    redis_rate.Limit
	leases   *leases
	*outage
}

// outage is the state of Redis as the limiters on one client see it
// (NewRedis and its WithLimit siblings): one failure makes all of them
// skip Redis for RedisBackoff, so an outage costs one slow request per
// interval however many budgets edge keeps, and is logged once.
type outage struct {
	logger *slog.Logger
	now    func() time.Time
	// degraded is true while decisions come from the fallback.
	degraded atomic.Bool
	// skipUntil is when to ask Redis again after a failure (Unix ns).
	skipUntil atomic.Int64
}

var _ Limiter = (*Redis)(nil)

// NewRedis allows perSecond requests per second per key on average and
// bursts of up to burst requests; each key is stored in Redis as prefix+key.
// A nil logger means slog.Default().
func NewRedis(client *redis.Client, prefix string, perSecond, burst int, logger *slog.Logger) (*Redis, error) {
	if client == nil {
		return nil, errors.New("ratelimit: nil redis client")
	}
	if perSecond < 1 {
		return nil, errors.New("ratelimit: rate must be at least 1 per second")
	}
	if burst < 1 {
		return nil, errors.New("ratelimit: burst must be at least 1")
	}
	if logger == nil {
		logger = slog.Default()
	}
	return &Redis{
		limiter: redis_rate.NewLimiter(prefixed{Client: client, prefix: prefix}),
		limit:   redis_rate.Limit{Rate: perSecond, Burst: burst, Period: time.Second},
		leases:  newLeases(burst),
		outage:  &outage{logger: logger, now: time.Now},
	}, nil
}

// WithLimit returns a limiter of another rate and burst on r's client and
// prefix that shares r's view of Redis's health (the backoff after a
// failure, Degraded, the log lines). Its Fallback is unset. Keys of the
// two must differ if their budgets are to be separate.
func (r *Redis) WithLimit(perSecond, burst int) (*Redis, error) {
	if perSecond < 1 {
		return nil, errors.New("ratelimit: rate must be at least 1 per second")
	}
	if burst < 1 {
		return nil, errors.New("ratelimit: burst must be at least 1")
	}
	return &Redis{
		limiter: r.limiter,
		limit:   redis_rate.Limit{Rate: perSecond, Burst: burst, Period: time.Second},
		leases:  newLeases(burst),
		outage:  r.outage,
	}, nil
}

// Degraded reports whether decisions currently come from the fallback
// (Redis failed and has not answered since).
func (o *outage) Degraded() bool { return o.degraded.Load() }

// fallback decides without Redis.
func (r *Redis) fallback(ctx context.Context, key string) (Decision, error) {
	if r.Fallback == nil {
		return Decision{Allowed: true}, nil
	}
	return r.Fallback.Allow(ctx, key)
}

// Allow takes one request from key's budget. When Redis fails the
// Fallback decides (see the package doc), and a warning is logged when
// that starts; the error is nil.
func (r *Redis) Allow(ctx context.Context, key string) (Decision, error) {
	if r.now().UnixNano() < r.skipUntil.Load() {
		return r.fallback(ctx, key)
	}
	now := r.now()
	if d, ok := r.leases.take(key, now); ok {
		return d, nil
	}
	callCtx, cancel := context.WithTimeout(ctx, RedisTimeout)
	defer cancel()
	n := r.leases.size(key, now)
	res, err := r.limiter.AllowAtMost(callCtx, key, r.limit, n)
	if err != nil {
		r.leases.abort(key)
		if ctx.Err() == nil { // not just the client going away
			r.skipUntil.Store(r.now().Add(RedisBackoff).UnixNano())
			if !r.degraded.Swap(true) {
				how := "the in-process limiter of each replica decides"
				if r.Fallback == nil {
					how = "requests are allowed unlimited (GATEHOUSE_RATE_LIMIT_FALLBACK=open)"
				}
				r.logger.WarnContext(ctx, "rate limiter store unavailable; "+how, "error", err.Error())
			}
		}
		return r.fallback(ctx, key)
	}
	if r.degraded.Swap(false) {
		r.logger.InfoContext(ctx, "rate limiter store available again")
	}
	d := Decision{
		Allowed:    res.Allowed > 0,
		Limit:      res.Limit.Burst,
		Remaining:  res.Remaining,
		ResetAfter: max(res.ResetAfter, 0),
	}
	if !d.Allowed {
		d.RetryAfter = max(res.RetryAfter, 0)
	}
	r.leases.store(key, n, res.Allowed-1, d, now)
	return d, nil
}

// prefixed puts keys under the caller's prefix instead of redis_rate's fixed
// "rate:", so a deployment's keys share one namespace (and tests clean up).
type prefixed struct {
	*redis.Client
	prefix string
}

const redisRatePrefix = "rate:"

func (p prefixed) keys(keys []string) []string {
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = p.prefix + strings.TrimPrefix(k, redisRatePrefix)
	}
	return out
}

func (p prefixed) Eval(ctx context.Context, script string, keys []string, args ...any) *redis.Cmd {
	return p.Client.Eval(ctx, script, p.keys(keys), args...)
}

func (p prefixed) EvalSha(ctx context.Context, sha1 string, keys []string, args ...any) *redis.Cmd {
	return p.Client.EvalSha(ctx, sha1, p.keys(keys), args...)
}

func (p prefixed) EvalRO(ctx context.Context, script string, keys []string, args ...any) *redis.Cmd {
	return p.Client.EvalRO(ctx, script, p.keys(keys), args...)
}

func (p prefixed) EvalShaRO(ctx context.Context, sha1 string, keys []string, args ...any) *redis.Cmd {
	return p.Client.EvalShaRO(ctx, sha1, p.keys(keys), args...)
}

func (p prefixed) Del(ctx context.Context, keys ...string) *redis.IntCmd {
	return p.Client.Del(ctx, p.keys(keys)...)
}
