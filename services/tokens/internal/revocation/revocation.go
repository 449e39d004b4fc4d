package revocation

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gatehouse-id/gatehouse/pkg/db"
)

// Defaults for Options' zero values.
const (
	DefaultPrefix           = "gatehouse:tokens:"
	DefaultMaxMemoryEntries = 100_000
	DefaultSyncInterval     = 2 * time.Second
	DefaultPruneInterval    = time.Hour
)

const (
	// redisBackoff: after a Redis error, checks skip Redis for this long
	// (wall clock) and go to the database, so an outage costs one timeout
	// per period rather than one per request.
	redisBackoff = time.Second
	// retryEvery: background rebuilds, loads and syncs start at most this
	// often, so a held lock or a failing dependency is not hammered.
	retryEvery = 500 * time.Millisecond
	warnEvery  = 30 * time.Second
	// pushTimeout bounds the push after the database write; it runs
	// detached from the caller's context so a client hanging up between
	// the commit and the push does not leave the list behind.
	pushTimeout = 2 * time.Second
)

// ErrInvalid: a revocation without a token id, without an expiry, or with
// as many expiries as ids. Nothing is written.
var ErrInvalid = errors.New("revocation: invalid request")

// Options configure a List. Zero values take the defaults above.
type Options struct {
	// RedisURL is GATEHOUSE_REDIS_URL; empty keeps the list in memory.
	RedisURL string
	// Prefix starts every Redis key this list writes.
	Prefix string
	// MaxMemoryEntries bounds the in-memory list; beyond it misses are
	// answered from the database.
	MaxMemoryEntries int
	// SyncInterval and PruneInterval pace Run.
	SyncInterval  time.Duration
	PruneInterval time.Duration
	Logger        *slog.Logger
	// Now decides which revocations have expired.
	Now func() time.Time
}

// List is the revocation list. It is safe for concurrent use; a process
// should build one and share it.
type List struct {
	store      *db.DB
	now        func() time.Time
	log        *slog.Logger
	syncEvery  time.Duration
	pruneEvery time.Duration
	pruner     *db.Pruner

	redis *redisList // nil in memory mode
	mem   *memList   // nil in Redis mode
	// exclusive: memory mode on SQLite, where this process alone writes the
	// table, so a complete in-memory copy may answer misses.
	exclusive bool

	// Redis health. failures counts errors seen (and pushes not made);
	// synced is the count a complete sync has since covered. While
	// failures > synced this replica answers misses from the database.
	downUntil atomic.Int64 // wall-clock Unix ns
	failures  atomic.Int64
	synced    atomic.Int64

	rebuildTask, syncTask, loadTask task

	lastWarn   atomic.Int64
	suppressed atomic.Int64

	bgMu   sync.Mutex
	closed bool
	bgCtx  context.Context
	stop   context.CancelFunc
	bg     sync.WaitGroup
}

// task is a single-flight background job with a retry pause.
type task struct {
	running atomic.Bool
	last    atomic.Int64 // wall-clock Unix ns of the last start
}

// New builds the list on the tokens database. With o.RedisURL set it
// opens (and on Close closes) its own Redis client; nothing is contacted
// until the first call.
func New(store *db.DB, o Options) (*List, error) {
	if store == nil {
		return nil, errors.New("revocation: nil database")
	}
	l := &List{
		store:      store,
		now:        o.Now,
		log:        o.Logger,
		syncEvery:  o.SyncInterval,
		pruneEvery: o.PruneInterval,
	}
	if l.now == nil {
		l.now = time.Now
	}
	if l.log == nil {
		l.log = slog.Default()
	}
	if l.syncEvery <= 0 {
		l.syncEvery = DefaultSyncInterval
	}
	if l.pruneEvery <= 0 {
		l.pruneEvery = DefaultPruneInterval
	}
	l.pruner = &db.Pruner{DB: store, Service: "tokens", Lock: "revocation", Steps: []db.PruneStep{pruneStep}, Logger: l.log}
	if o.RedisURL != "" {
		prefix := o.Prefix
		if prefix == "" {
			prefix = DefaultPrefix
		}
		r, err := newRedisList(o.RedisURL, prefix)
		if err != nil {
			return nil, err
		}
		l.redis = r
	} else {
		max := o.MaxMemoryEntries
		if max <= 0 {
			max = DefaultMaxMemoryEntries
		}
		l.mem = newMemList(max)
		l.exclusive = store.Dialect() == db.SQLite
	}
	l.bgCtx, l.stop = context.WithCancel(context.Background())
	return l, nil
}

// Revoke revokes one token until expiresAt. See RevokeMany.
func (l *List) Revoke(ctx context.Context, tokenID string, expiresAt time.Time) error {
	return l.RevokeMany(ctx, []string{tokenID}, []time.Time{expiresAt})
}

// RevokeMany revokes ids[i] until expiresAt[i] (a token's own expiry), all
// in one database transaction; an id revoked again keeps the later expiry.
// It returns an error only when the database write failed (then nothing
// is revoked) or the input is invalid (ErrInvalid). Once the write is
// committed the revocation holds: the push to the fast list follows, and
// if Redis fails the row stays marked pending for Sync while checks fall
// back to the database.
func (l *List) RevokeMany(ctx context.Context, ids []string, expiresAt []time.Time) error {
	es, err := entries(ids, expiresAt)
	if err != nil {
		return err
	}
	if len(es) == 0 {
		return nil
	}
	now := l.now()
	recorded, err := insert(ctx, l.store, es, now, l.redis != nil)
	if err != nil {
		return err
	}
	if l.redis == nil {
		l.mem.add(recorded, now)
		return nil
	}
	if l.redisDown() {
		l.failures.Add(1) // counted after the insert: a sync must see the row
		return nil
	}
	pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), pushTimeout)
	defer cancel()
	if err := l.redis.push(pctx, recorded, now); err != nil {
		l.redisFailed(err)
		return nil
	}
	if err := clearPending(pctx, l.store, recorded); err != nil {
		// The rows stay pending and a later Sync pushes them again.
		l.warn("revocation: clearing pending flags failed", err)
	}
	return nil
}

// entries validates and deduplicates a revocation request.
func entries(ids []string, expiresAt []time.Time) ([]entry, error) {
	if len(ids) != len(expiresAt) {
		return nil, fmt.Errorf("%w: %d token ids but %d expiries", ErrInvalid, len(ids), len(expiresAt))
	}
	es := make([]entry, 0, len(ids))
	seen := make(map[string]int, len(ids))
	for i, id := range ids {
		switch {
		case id == "":
			return nil, fmt.Errorf("%w: empty token id at %d", ErrInvalid, i)
		case expiresAt[i].IsZero():
			return nil, fmt.Errorf("%w: no expiry for token id at %d", ErrInvalid, i)
		}
		if j, ok := seen[id]; ok {
			if expiresAt[i].After(es[j].ExpiresAt) {
				es[j].ExpiresAt = expiresAt[i]
			}
			continue
		}
		seen[id] = len(es)
		es = append(es, entry{ID: id, ExpiresAt: expiresAt[i]})
	}
	return es, nil
}

// IsRevoked reports whether tokenID is revoked and its revocation has not
// expired. It returns an error only when it cannot answer from any source
// (the database failed after, or instead of, the fast list); Redis errors
// are logged, never returned.
func (l *List) IsRevoked(ctx context.Context, tokenID string) (bool, error) {
	until, err := l.RevokedUntil(ctx, tokenID)
	return !until.IsZero(), err
}

// RevokedUntil returns the expiry of id's unexpired revocation, or the
// zero time when id is not revoked (or its revocation has expired). Errors
// as IsRevoked.
func (l *List) RevokedUntil(ctx context.Context, id string) (time.Time, error) {
	until, err := l.revokedUntil(ctx, id)
	if err != nil {
		return time.Time{}, err
	}
	return until[0], nil
}

// TokenRevoked reports whether a token is revoked by its id, or by a
// cut-off of its user (UserKey) that covers its expiry, in one lookup
// (one Redis round trip). Errors as IsRevoked.
func (l *List) TokenRevoked(ctx context.Context, tokenID, subject string, expiresAt time.Time) (bool, error) {
	until, err := l.revokedUntil(ctx, tokenID, UserKey(subject))
	if err != nil {
		return false, err
	}
	return !until[0].IsZero() || UserCovers(until[1], expiresAt), nil
}

// revokedUntil is RevokedUntil of each id, answered together.
func (l *List) revokedUntil(ctx context.Context, ids ...string) ([]time.Time, error) {
	out := make([]time.Time, len(ids))
	var (
		exps []int64
		err  error
	)
	if l.redis == nil {
		exps, err = l.memRevoked(ctx, ids, l.now())
	} else {
		exps, err = l.redisRevoked(ctx, ids, l.now())
	}
	if err != nil {
		return out, err
	}
	for i, exp := range exps {
		if exp != 0 {
			out[i] = time.UnixMicro(exp)
		}
	}
	return out, nil
}

// memRevoked and redisRevoked return each id's unexpired revocation's
// expiry in Unix µs, or 0. An empty id is never revoked (Revoke refuses
// empty ids).
func (l *List) memRevoked(ctx context.Context, ids []string, now time.Time) ([]int64, error) {
	out := make([]int64, len(ids))
	for i, id := range ids {
		if id == "" {
			continue
		}
		var err error
		if out[i], err = l.memRevokedOne(ctx, id, now); err != nil {
			return out, err
		}
	}
	return out, nil
}

func (l *List) memRevokedOne(ctx context.Context, id string, now time.Time) (int64, error) {
	exp, found, complete := l.mem.lookup(id)
	if found && now.UnixMicro() < exp {
		return exp, nil
	}
	if complete {
		return 0, nil
	}
	if l.exclusive {
		l.kick(&l.loadTask, l.loadMemory, "revocation: loading the in-memory list failed")
	}
	return revokedInDB(ctx, l.store, id, now)
}

func (l *List) redisRevoked(ctx context.Context, ids []string, now time.Time) ([]int64, error) {
	out := make([]int64, len(ids))
	// askDB[i]: the list cannot answer for ids[i] (not trustworthy, or an
	// expired or unreadable entry, which is rare): ask the table, which
	// holds the latest expiry.
	askDB := make([]bool, len(ids))
	for i := range askDB {
		askDB[i] = ids[i] != ""
	}
	if !l.redisDown() {
		res, loaded, err := l.redis.lookup(ctx, ids)
		if err != nil {
			if ctxErr := ctx.Err(); ctxErr != nil {
				return out, fmt.Errorf("revocation: check: %w", ctxErr)
			}
			l.redisFailed(err)
		} else {
			dirty := l.dirty()
			for i, f := range res {
				switch {
				case ids[i] == "":
				case f.ok && f.valid && now.UnixMicro() < f.exp:
					out[i], askDB[i] = f.exp, false
				case !loaded:
					l.kick(&l.rebuildTask, l.rebuild, "revocation: rebuilding the Redis list failed")
				case dirty:
					l.kick(&l.syncTask, l.syncRedis, "revocation: syncing pending revocations to Redis failed")
				case !f.ok:
					askDB[i] = false
				}
			}
		}
	}
	for i, ask := range askDB {
		if !ask {
			continue
		}
		var err error
		if out[i], err = revokedInDB(ctx, l.store, ids[i], now); err != nil {
			return out, err
		}
	}
	return out, nil
}

// Sync brings the fast list up to date with the table: in Redis mode it
// pushes rows still marked pending (revocations whose push failed, here or
// on another replica) and rebuilds the list if its loaded marker is
// missing; in memory mode it loads the table if misses are not yet
// trusted. Run calls it every SyncInterval.
func (l *List) Sync(ctx context.Context) error {
	if l.redis == nil {
		if l.exclusive && l.mem.needsLoad() {
			return l.loadMemory(ctx)
		}
		return nil
	}
	return l.syncRedis(ctx)
}

func (l *List) syncRedis(ctx context.Context) error {
	seen := l.failures.Load() // before reading: later failures keep us dirty
	err := eachPage(ctx, l.store, qPending, nil, func(page []entry) error {
		if err := l.redis.push(ctx, page, l.now()); err != nil {
			l.markRedisDown()
			return err
		}
		return clearPending(ctx, l.store, page)
	})
	if err != nil {
		return err
	}
	loaded, err := l.redis.markerExists(ctx)
	if err != nil {
		l.markRedisDown()
		return fmt.Errorf("revocation: check Redis loaded marker: %w", err)
	}
	if !loaded {
		if err := l.rebuild(ctx); err != nil {
			return err
		}
	}
	for {
		cur := l.synced.Load()
		if seen <= cur || l.synced.CompareAndSwap(cur, seen) {
			return nil
		}
	}
}

// rebuild loads the table into Redis unless another replica is doing so.
func (l *List) rebuild(ctx context.Context) error {
	now := l.now()
	done, err := l.redis.rebuild(ctx, l.now, func(fn func([]entry) error) error {
		return eachPage(ctx, l.store, qUnexpired, []any{now}, fn)
	})
	if err != nil {
		if !errors.Is(err, errRebuildInterrupted) {
			l.markRedisDown()
		}
		return err
	}
	if done {
		l.log.InfoContext(ctx, "revocation: Redis list rebuilt from the database")
	}
	return nil
}

func (l *List) loadMemory(ctx context.Context) error {
	now := l.now()
	return l.mem.load(ctx, now, func(fn func([]entry) error) error {
		return eachPage(ctx, l.store, qUnexpired, []any{now}, fn)
	})
}

// Prune deletes expired revocations from the table (in batches, one
// replica at a time) and the memory list, and returns how many rows it
// deleted. Redis entries expire by TTL.
func (l *List) Prune(ctx context.Context) (int64, error) {
	now := l.now()
	r, err := l.pruner.RunOnce(ctx, now)
	if err != nil {
		return 0, fmt.Errorf("revocation: prune expired revocations: %w", err)
	}
	n := r.Deleted[pruneStep.Table]
	if l.mem != nil {
		l.mem.sweep(now)
		if l.exclusive && l.mem.needsLoad() {
			if err := l.loadMemory(ctx); err != nil {
				return n, err
			}
		}
	}
	return n, nil
}

// Run calls Sync every SyncInterval and Prune every PruneInterval until
// ctx ends, logging (rate-limited) what fails. Start it once per process:
// go list.Run(ctx).
func (l *List) Run(ctx context.Context) {
	syncT := time.NewTicker(l.syncEvery)
	defer syncT.Stop()
	pruneT := time.NewTicker(l.pruneEvery)
	defer pruneT.Stop()
	for {
		if err := l.Sync(ctx); err != nil && ctx.Err() == nil {
			l.warn("revocation: sync failed", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-syncT.C:
		case <-pruneT.C:
			if n, err := l.Prune(ctx); err != nil && ctx.Err() == nil {
				l.warn("revocation: prune failed", err)
			} else if n > 0 {
				l.log.DebugContext(ctx, "revocation: pruned expired revocations", slog.Int64("rows", n))
			}
		}
	}
}

// Close stops background work and closes the Redis client. Call it before
// closing the database.
func (l *List) Close() error {
	l.bgMu.Lock()
	l.closed = true
	l.bgMu.Unlock()
	l.stop()
	l.bg.Wait()
	if l.redis != nil {
		if err := l.redis.rdb.Close(); err != nil {
			return fmt.Errorf("revocation: close Redis client: %w", err)
		}
	}
	return nil
}

// kick starts fn in the background unless it is running or started less
// than retryEvery ago.
func (l *List) kick(t *task, fn func(context.Context) error, failMsg string) {
	start := time.Now().UnixNano()
	if start-t.last.Load() < int64(retryEvery) || !t.running.CompareAndSwap(false, true) {
		return
	}
	t.last.Store(start)
	l.bgMu.Lock()
	defer l.bgMu.Unlock()
	if l.closed {
		t.running.Store(false)
		return
	}
	l.bg.Add(1)
	go func() {
		defer l.bg.Done()
		defer t.running.Store(false)
		if err := fn(l.bgCtx); err != nil && l.bgCtx.Err() == nil {
			l.warn(failMsg, err)
		}
	}()
}

func (l *List) redisDown() bool {
	return time.Now().UnixNano() < l.downUntil.Load()
}

func (l *List) dirty() bool {
	return l.failures.Load() > l.synced.Load()
}

// markRedisDown records a Redis failure: this replica skips Redis for a
// moment and distrusts misses until a sync has pushed every pending row.
func (l *List) markRedisDown() {
	l.failures.Add(1)
	l.downUntil.Store(time.Now().Add(redisBackoff).UnixNano())
}

func (l *List) redisFailed(err error) {
	l.markRedisDown()
	l.warn("revocation: Redis unavailable, answering from the database", err)
}

// warn logs at most once per warnEvery, counting what it held back.
func (l *List) warn(msg string, err error) {
	now := time.Now().UnixNano()
	last := l.lastWarn.Load()
	if now-last < int64(warnEvery) || !l.lastWarn.CompareAndSwap(last, now) {
		l.suppressed.Add(1)
		return
	}
	l.log.Warn(msg, slog.String("err", err.Error()), slog.Int64("suppressed", l.suppressed.Swap(0)))
}

// UserKey is the list id that revokes every access token of a user issued
// up to a cut-off (RevokeUserTokens). Token ids are random base64url, so
// they never start with "user:".
func UserKey(subject string) string { return "user:" + subject }

// UserUntil is the expiry of a user entry for a cut-off: a token's iat is
// whole seconds, so every access token issued in or before notAfter's
// second expires by then (one issued in that second after the cut-off
// too: the safe side), and one issued in a later second expires after it.
// UserCovers is the check.
func UserUntil(notAfter time.Time, accessTTL time.Duration) time.Time {
	return notAfter.Truncate(time.Second).Add(accessTTL)
}

// UserCovers reports whether a user entry expiring at until revokes a
// token of that user expiring at tokenExp.
func UserCovers(until, tokenExp time.Time) bool {
	return !until.IsZero() && !tokenExp.After(until)
}
