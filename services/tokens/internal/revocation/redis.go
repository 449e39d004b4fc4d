package revocation

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/gatehouse-id/gatehouse/pkg/secrets"
)

const (
	// ttlMargin keeps a Redis entry past the token's expiry, so a replica
	// whose clock lags still finds it; the value (the expiry) decides.
	ttlMargin = 5 * time.Minute
	// lockTTL bounds a crashed rebuilder's hold on the rebuild lock; a
	// live rebuilder extends it with every page.
	lockTTL = time.Minute
)

// pushScript sets a revocation entry unless Redis already holds a later
// expiry for the id, so pushes that race never shorten a revocation.
// KEYS[1] the entry; ARGV[1] expiry (Unix µs); ARGV[2] TTL (ms).
const pushScript = `local cur = redis.call('GET', KEYS[1])
if cur and tonumber(cur) and tonumber(cur) >= tonumber(ARGV[1]) then return 0 end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return 1`

// finishScript writes the loaded marker only if this rebuild still holds
// the lock: a flush during the rebuild deleted the lock, and then the
// marker must not claim a complete list. The marker's value is the Redis
// server's run_id (see staleScript). KEYS[1] lock, KEYS[2] marker; ARGV[1]
// the rebuild's nonce, ARGV[2] the run_id.
const finishScript = `if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('SET', KEYS[2], ARGV[2])
  redis.call('DEL', KEYS[1])
  return 1
end
return 0`

// staleScript deletes the loaded marker when it was written by another
// Redis server lifetime than the one answering. A Redis restarted from a
// snapshot (or a replica promoted after a failover) holds the marker but
// may lack entries pushed after the snapshot: without the marker, misses
// go to the database until a rebuild completes. KEYS[1] marker; ARGV[1]
// the answering server's run_id.
const staleScript = `local m = redis.call('GET', KEYS[1])
if m and m ~= ARGV[1] then redis.call('DEL', KEYS[1]) return 1 end
return 0`

// releaseScript drops the rebuild lock if this rebuild still holds it.
const releaseScript = `if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0`

// errRebuildInterrupted: the rebuild lost its lock (flush or expiry).
var errRebuildInterrupted = errors.New("revocation: Redis rebuild interrupted (lock lost)")

// NewRedisClient opens a client for GATEHOUSE_REDIS_URL with timeouts short
// enough for a per-request check (dial 1 s with one attempt per try,
// read/write 500 ms, one retry) unless the URL sets them (dial_timeout,
// read_timeout, write_timeout, max_retries query parameters); go-redis's
// defaults would hold a check for seconds against a dead Redis. Its errors
// never contain the URL.
func NewRedisClient(rawURL string) (*redis.Client, error) {
	opts, err := redisOptions(rawURL)
	if err != nil {
		return nil, err
	}
	return redis.NewClient(opts), nil
}

func redisOptions(rawURL string) (*redis.Options, error) {
	opts, err := redis.ParseURL(rawURL)
	if err != nil {
		var uerr *url.Error
		if errors.As(err, &uerr) {
			return nil, errors.New("revocation: GATEHOUSE_REDIS_URL is not a valid URL")
		}
		return nil, fmt.Errorf("revocation: GATEHOUSE_REDIS_URL: %w", err)
	}
	u, _ := url.Parse(rawURL) // parsed successfully above
	q := u.Query()
	if opts.ClientName == "" {
		opts.ClientName = "gatehouse-tokens" // CLIENT LIST names the holder
	}
	if !q.Has("dial_timeout") {
		opts.DialTimeout = time.Second
	}
	if !q.Has("read_timeout") {
		opts.ReadTimeout = 500 * time.Millisecond
	}
	if !q.Has("write_timeout") {
		opts.WriteTimeout = 500 * time.Millisecond
	}
	if !q.Has("max_retries") {
		opts.MaxRetries = 1
	}
	opts.DialerRetries = 1 // not settable by URL; go-redis's default is 5
	return opts, nil
}

// runID returns the Redis server's run_id (INFO server), which changes at
// every start; "" when the server does not report one (then markers are
// not bound to a server lifetime).
func runID(ctx context.Context, c redis.Cmdable) (string, error) {
	info, err := c.Info(ctx, "server").Result()
	if err != nil {
		return "", err
	}
	for line := range strings.Lines(info) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "run_id:"); ok {
			return v, nil
		}
	}
	return "", nil
}

// checkMarker runs on every new connection, before any command of the
// list uses it. A Redis restart breaks every connection, so no lookup can
// reach a restarted server without this check having removed a marker of
// an earlier lifetime first.
func checkMarker(marker string) func(context.Context, *redis.Conn) error {
	return func(ctx context.Context, cn *redis.Conn) error {
		id, err := runID(ctx, cn)
		var refused redis.Error
		if errors.As(err, &refused) {
			return nil // INFO disabled (some managed Redis): markers stay unbound
		}
		if err != nil || id == "" {
			return err
		}
		return cn.Eval(ctx, staleScript, []string{marker}, id).Err()
	}
}

// redisList is the Redis-backed list.
type redisList struct {
	rdb    *redis.Client
	prefix string // entries: prefix+id
	marker string
	lock   string
	batch  batcher
}

// newRedisList opens the list's client for rawURL (see NewRedisClient),
// checking the loaded marker on every new connection (checkMarker).
func newRedisList(rawURL, prefix string) (*redisList, error) {
	opts, err := redisOptions(rawURL)
	if err != nil {
		return nil, err
	}
	r := &redisList{
		prefix: prefix + "revoked:",
		marker: prefix + "revocations:loaded",
		lock:   prefix + "revocations:loading",
	}
	opts.OnConnect = checkMarker(r.marker)
	r.rdb = redis.NewClient(opts)
	r.batch.mget = func(ctx context.Context, keys []string) ([]any, error) {
		return r.rdb.MGet(ctx, keys...).Result()
	}
	return r, nil
}

// found is one id's entry as lookup read it: exp is its expiry (Unix µs)
// when ok; valid is false when the stored value is unreadable.
type found struct {
	exp       int64
	ok, valid bool
}

// lookup reads the entries of ids and the marker in one command (MGET),
// so one round trip answers a token and its user's cut-off; concurrent
// lookups share it (batcher).
func (r *redisList) lookup(ctx context.Context, ids []string) (res []found, loaded bool, err error) {
	keys := make([]string, 0, len(ids)+1)
	for _, id := range ids {
		keys = append(keys, r.prefix+id)
	}
	vals, err := r.batch.get(ctx, append(keys, r.marker))
	if err != nil {
		return nil, false, err
	}
	if len(vals) != len(keys)+1 {
		return nil, false, fmt.Errorf("revocation: MGET returned %d values; want %d", len(vals), len(keys)+1)
	}
	res = make([]found, len(ids))
	for i := range ids {
		v, ok := vals[i].(string)
		if !ok {
			res[i] = found{valid: true}
			continue
		}
		exp, perr := strconv.ParseInt(v, 10, 64)
		res[i] = found{exp: exp, ok: true, valid: perr == nil}
	}
	return res, vals[len(ids)] != nil, nil
}

var pushLua = redis.NewScript(pushScript)

// push writes entries (skipping expired ones) in one round trip, by
// EVALSHA; after a Redis restart emptied the script cache it loads the
// script and tries once more.
func (r *redisList) push(ctx context.Context, es []entry, now time.Time) error {
	err := r.pushOnce(ctx, es, now)
	if err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
		if lerr := pushLua.Load(ctx, r.rdb).Err(); lerr != nil {
			return fmt.Errorf("revocation: load push script: %w", lerr)
		}
		err = r.pushOnce(ctx, es, now)
	}
	if err != nil {
		return fmt.Errorf("revocation: push to Redis: %w", err)
	}
	return nil
}

func (r *redisList) pushOnce(ctx context.Context, es []entry, now time.Time) error {
	pipe := r.rdb.Pipeline()
	n := 0
	for _, e := range es {
		if !e.ExpiresAt.After(now) {
			continue
		}
		ttl := e.ExpiresAt.Sub(now) + ttlMargin
		pushLua.EvalSha(ctx, pipe, []string{r.prefix + e.ID},
			strconv.FormatInt(e.ExpiresAt.UnixMicro(), 10), strconv.FormatInt(ttl.Milliseconds(), 10))
		n++
	}
	if n == 0 {
		return nil
	}
	_, err := pipe.Exec(ctx)
	return err
}

// markerExists reports whether a full load has been recorded.
func (r *redisList) markerExists(ctx context.Context) (bool, error) {
	n, err := r.rdb.Exists(ctx, r.marker).Result()
	return n > 0, err
}

// rebuild loads every unexpired revocation (read by each) into Redis and
// then writes the marker. It returns false without error when another
// replica holds the rebuild lock.
func (r *redisList) rebuild(ctx context.Context, now func() time.Time, each func(func([]entry) error) error) (bool, error) {
	nonce := secrets.NewID()
	ok, err := r.rdb.SetNX(ctx, r.lock, nonce, lockTTL).Result()
	if err != nil {
		return false, fmt.Errorf("revocation: take Redis rebuild lock: %w", err)
	}
	if !ok {
		return false, nil
	}
	err = each(func(page []entry) error {
		if err := r.push(ctx, page, now()); err != nil {
			return err
		}
		// Still ours? Extend it for the next page.
		pipe := r.rdb.Pipeline()
		held := pipe.Get(ctx, r.lock)
		pipe.PExpire(ctx, r.lock, lockTTL)
		if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
			return fmt.Errorf("revocation: extend Redis rebuild lock: %w", err)
		}
		if held.Val() != nonce {
			return errRebuildInterrupted
		}
		return nil
	})
	if err != nil {
		// Let the next attempt (here or on another replica) start at once.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		defer cancel()
		_ = r.rdb.Eval(rctx, releaseScript, []string{r.lock}, nonce).Err()
		return false, err
	}
	id, err := runID(ctx, r.rdb)
	if err != nil {
		return false, fmt.Errorf("revocation: read the Redis run_id: %w", err)
	}
	if id == "" {
		id = "1" // a server that hides its run_id: an unbound marker
	}
	done, err := r.rdb.Eval(ctx, finishScript, []string{r.lock, r.marker}, nonce, id).Int()
	if err != nil {
		return false, fmt.Errorf("revocation: write Redis loaded marker: %w", err)
	}
	if done != 1 {
		return false, errRebuildInterrupted
	}
	return true, nil
}
