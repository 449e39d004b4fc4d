// Package dircache keeps what a service reads from the directory (tokens:
// clients, machine keys, users' claims; authn: clients, organizations and
// their policies, identity provider lists) in memory and usable through a
// directory outage, without ever serving what a change the directory
// acknowledged has made wrong.
//
// A Watcher follows the directory's change feed (ListChanges) and drops
// every cached entry that depends on a changed object (see Dep). While the feed is
// in sync an entry is served from memory however old it is; when the feed
// is behind (the directory is down, or too old to have the feed) an entry
// is served only for TTL, then fetched again, and if the directory is
// unavailable it is served until MaxStale after it was fetched. So a
// change reaches every replica within one poll of its commit while the
// directory is up, and through an outage the staleness is bounded by
// MaxStale (and then only for changes made in the last poll before it).
package dircache

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"connectrpc.com/connect"
	"github.com/maypok86/otter/v2"

	"github.com/gatehouse-id/gatehouse/pkg/cache"
	"github.com/gatehouse-id/gatehouse/pkg/feed"
	directoryv1 "github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/directory/v1"
)

// Feed is the directory's change feed.
type Feed interface {
	ListChanges(context.Context, *directoryv1.ListChangesRequest) (*directoryv1.ListChangesResponse, error)
}

// Defaults.
const (
	DefaultInterval = feed.DefaultInterval
	DefaultTTL      = 10 * time.Second
	DefaultMaxStale = feed.DefaultMaxStale
	maxEntries      = 10000
)

// Watcher follows the feed and invalidates its caches.
type Watcher struct {
	Feed     Feed
	Interval time.Duration // between polls; DefaultInterval
	TTL      time.Duration // entry lifetime while the feed is behind; DefaultTTL
	MaxStale time.Duration // longest an entry serves through an outage; DefaultMaxStale
	Now      func() time.Time
	Logger   *slog.Logger

	once     sync.Once
	follower *feed.Follower

	mu     sync.Mutex
	cursor uint64
	// followed: the cursor is valid (the feed was read from its start).
	followed bool
	applied  map[uint64]bool // unsettled changes already applied
	gen      uint64          // bumped by every invalidation
	// recent holds what the last invalidations changed (recent[i] is
	// generation gen-len(recent)+1+i), so a fetch that overlapped some
	// keeps its value unless one touched what the value depends on.
	recent []invalidation
	caches []invalidator
	// unavailableAt is when a read last found the directory unavailable
	// (refused, or no answer within the call's deadline).
	unavailableAt time.Time
	runCtx        context.Context // Run's, for refetches after a change
}

// feed returns the follower of the change feed, which holds the clocks.
func (w *Watcher) feed() *feed.Follower {
	w.once.Do(func() {
		w.follower = &feed.Follower{Name: "directory change feed", Read: w.read, Interval: w.Interval, MaxStale: w.MaxStale,
			Serving: "cached directory data serves", Now: w.Now, Logger: w.Logger}
	})
	return w.follower
}

type invalidation struct {
	changed map[string]bool
	all     bool
}

// maxRecent bounds Watcher.recent; a fetch that overlapped more
// invalidations than this is not kept.
const maxRecent = 256

// touchedSince reports whether an invalidation after generation gen
// changed one of deps (or everything), or is no longer remembered.
// Called with w.mu held.
func (w *Watcher) touchedSince(gen uint64, deps []Dep) bool {
	n := w.gen - gen
	if n == 0 {
		return false
	}
	if n > uint64(len(w.recent)) || len(deps) == 0 {
		return true
	}
	for _, inv := range w.recent[uint64(len(w.recent))-n:] {
		if inv.all {
			return true
		}
		for _, d := range deps {
			if inv.changed[string(d)] {
				return true
			}
		}
	}
	return false
}

type invalidator interface {
	invalidate(changed map[string]bool, all bool)
}

// Dep names what an entry depends on; a change of it drops the entry.
type Dep string

// Object is a dependency on one object (aggregate) by id: an organization,
// a user, a project (with its apps).
func Object(id string) Dep { return Dep("id:" + id) }

// Credential is a dependency on what lets an object act or be acted as:
// a user's state, secrets, keys and grants, an app's registration. Every
// change of the object is one, but for the kinds in CredentialNeutral.
// A machine user's client and keys depend on it, so that a metadata entry
// written just before a directory outage does not leave the machine
// without its cached client through the outage.
func Credential(id string) Dep { return Dep("cred:" + id) }

// CredentialNeutral lists the event types (the directory's
// users.EventMetadataSet and users.EventMetadataRemoved, which its tests
// hold to these names) that change no Credential dependency. A change
// without a type (from a directory older than the field) is not neutral.
var CredentialNeutral = []string{"user.metadata.set", "user.metadata.removed"}

var credentialNeutral = func() map[string]bool {
	m := map[string]bool{}
	for _, t := range CredentialNeutral {
		m[t] = true
	}
	return m
}()

// AnyOf is a dependency on every object of a type in an organization
// (such as the list of an organization's projects).
func AnyOf(orgID, aggregateType string) Dep { return Dep("type:" + orgID + "/" + aggregateType) }

func (w *Watcher) now() time.Time {
	if w.Now != nil {
		return w.Now()
	}
	return time.Now()
}

func (w *Watcher) ttl() time.Duration {
	if w.TTL > 0 {
		return w.TTL
	}
	return DefaultTTL
}

// InSync reports whether the last poll reached the feed's head recently
// enough that cached entries reflect every acknowledged change but those
// of the last poll interval.
func (w *Watcher) InSync() bool { return w.feed().InSync() }

// unavailableMemo is how long a stale entry is served without asking a
// directory that was just found unavailable: a hung one costs a request
// the internal call deadline, and a request reads several entries, so
// only one read in this window waits for it.
const unavailableMemo = 5 * time.Second

// noteUnavailable records a read that found the directory unavailable.
func (w *Watcher) noteUnavailable(err error) {
	if Unavailable(err) {
		w.mu.Lock()
		w.unavailableAt = w.now()
		w.mu.Unlock()
	}
}

// Poll reads the feed to its head once, invalidating as it goes.
func (w *Watcher) Poll(ctx context.Context) error { return w.feed().Poll(ctx) }

func (w *Watcher) read(ctx context.Context) error {
	for {
		w.mu.Lock()
		after, followed := w.cursor, w.followed
		w.mu.Unlock()
		if !followed {
			after = 0
		}
		res, err := w.Feed.ListChanges(ctx, &directoryv1.ListChangesRequest{AfterSequence: after})
		if err != nil {
			w.noteUnavailable(err)
			return err
		}
		m := res
		w.apply(m, followed)
		if !m.GetMore() || m.GetCursor() == after {
			return nil
		}
	}
}

func (w *Watcher) apply(m *directoryv1.ListChangesResponse, started bool) {
	changed, all := map[string]bool{}, false
	w.mu.Lock()
	if w.applied == nil {
		w.applied = map[uint64]bool{}
	}
	for _, c := range m.GetChanges() {
		if w.applied[c.GetSequence()] {
			continue
		}
		w.applied[c.GetSequence()] = true
		if c.GetOrgId() == "" {
			all = true // an instance-wide change
		}
		changed[string(Object(c.GetAggregateId()))] = true
		if !credentialNeutral[c.GetEventType()] {
			changed[string(Credential(c.GetAggregateId()))] = true
		}
		changed[string(AnyOf(c.GetOrgId(), c.GetAggregateType()))] = true
	}
	for seq := range w.applied {
		if seq <= m.GetCursor() {
			delete(w.applied, seq)
		}
	}
	w.cursor = m.GetCursor()
	if !started {
		// What was cached before the feed was followed may predate any
		// change: start from nothing.
		w.followed, all = true, true
	}
	if len(changed) > 0 || all {
		w.gen++
		if len(w.recent) == maxRecent {
			copy(w.recent, w.recent[1:])
			w.recent = w.recent[:maxRecent-1]
		}
		w.recent = append(w.recent, invalidation{changed: changed, all: all})
	}
	caches := w.caches
	w.mu.Unlock()
	if len(changed) > 0 || all {
		for _, c := range caches {
			c.invalidate(changed, all)
		}
	}
}

// Run polls every Interval until ctx ends. A failing feed is logged once
// per outage; a feed the directory does not have (an older version during
// a rolling upgrade) leaves the caches on TTL.
func (w *Watcher) Run(ctx context.Context) {
	w.mu.Lock()
	w.runCtx = ctx
	w.mu.Unlock()
	w.feed().Run(ctx, nil)
}

// Metric names of Metrics, one per service that caches.
const (
	TokensMetric = "gatehouse.tokens.directory_cache.behind"
	AuthnMetric  = "gatehouse.authn.directory_cache.behind"
)

// Metrics publishes, as name (TokensMetric, AuthnMetric), whether the
// caches run behind the feed.
func (w *Watcher) Metrics(name string) error {
	return w.feed().Metric(name,
		"1 while the service's directory cache is not in sync with the directory's change feed (directory unreachable).")
}

// ClientDeps is what a client's record is made of: its app's project (or
// machine user), its organization, the organizations its project is
// granted to (a removal ends the grant), and the organization's projects,
// which it lists as the audiences it may ask for (a project deactivated or
// added changes the list).
func ClientDeps(c *directoryv1.Client) []Dep {
	if c.GetKind() == directoryv1.ClientKind_CLIENT_KIND_MACHINE_USER {
		return MachineDeps(c.GetId(), c.GetOrgId())
	}
	deps := []Dep{Object(c.GetProjectId()), Object(c.GetOrgId()), AnyOf(c.GetOrgId(), "project")}
	for _, o := range c.GetGrantedOrgIds() {
		deps = append(deps, Object(o))
	}
	return deps
}

// MachineDeps is what a machine user's client or key depends on: the
// user's credentials (not its metadata), its organization and the
// organization's projects.
func MachineDeps(userID, orgID string) []Dep {
	return []Dep{Credential(userID), Object(orgID), AnyOf(orgID, "project")}
}

// Unavailable reports whether err means the directory could not answer,
// as opposed to an answer (NotFound is an answer).
func Unavailable(err error) bool {
	switch connect.CodeOf(err) {
	case connect.CodeUnavailable, connect.CodeDeadlineExceeded, connect.CodeUnknown:
		return true
	}
	return errors.Is(err, context.DeadlineExceeded)
}

// Cache holds values of one kind, each with the objects whose changes
// invalidate it; a value with none (a negative answer: the object may be
// created anywhere) is dropped at any change. The entries live in a
// bounded otter cache (pkg/cache): a burst of distinct keys evicts the
// coldest, and hits and misses are counted under the cache's name; the
// feed-driven invalidation is this package's.
type Cache[V any] struct {
	w *Watcher
	// mu orders a Refresh's check-then-store against invalidate's scan.
	mu sync.Mutex
	m  *otter.Cache[string, item[V]]

	refetching sync.WaitGroup // background reads after a change (tests wait on it)
}

type item[V any] struct {
	v       V
	deps    []Dep
	fetched time.Time
	fetch   Fetch[V] // to read it again after a change
}

// maxRefetch bounds the entries read again in the background after one
// poll's changes; the rest are read when next asked for.
const maxRefetch = 100

// NewCache returns a cache w invalidates; name names it in metrics
// ("tokens_clients").
func NewCache[V any](w *Watcher, name string) *Cache[V] {
	c := &Cache[V]{w: w, m: cache.New(cache.Options[string, item[V]]{Name: name, Size: maxEntries})}
	w.mu.Lock()
	w.caches = append(w.caches, c)
	w.mu.Unlock()
	return c
}

type freshKey struct{}

// Fresh marks ctx so that every Get under it reads from the directory,
// bypassing memory and never serving a stale value: for a decision that
// must see every change the directory has acknowledged (who may ask for
// an organization or the management API).
func Fresh(ctx context.Context) context.Context { return context.WithValue(ctx, freshKey{}, true) }

// IsFresh reports whether ctx was marked by Fresh.
func IsFresh(ctx context.Context) bool { v, _ := ctx.Value(freshKey{}).(bool); return v }

// Fetch reads a value from the directory, with what it depends on.
type Fetch[V any] func(context.Context) (V, []Dep, error)

// Get returns key's value: from memory while it can be trusted, otherwise
// fetched; when the fetch finds the directory unavailable, a value fetched
// at most MaxStale ago.
func (c *Cache[V]) Get(ctx context.Context, key string, fetch Fetch[V]) (V, error) {
	return c.GetUnless(ctx, key, fetch, nil)
}

// GetUnless is Get, except that a value in memory for which fresh reports
// true is read again from the directory (and never served stale): for
// values some of which decide what must see every acknowledged change,
// such as a client with grants. A nil fresh is Get.
func (c *Cache[V]) GetUnless(ctx context.Context, key string, fetch Fetch[V], fresh func(V) bool) (V, error) {
	if IsFresh(ctx) {
		return c.Refresh(ctx, key, fetch)
	}
	w := c.w
	now := w.now()
	inSync := w.InSync()
	w.mu.Lock()
	justUnavailable := !w.unavailableAt.IsZero() && now.Sub(w.unavailableAt) < unavailableMemo
	w.mu.Unlock()
	it, ok := c.m.GetIfPresent(key)
	if ok && fresh != nil && fresh(it.v) {
		return c.Refresh(ctx, key, fetch)
	}
	if ok && (inSync || now.Sub(it.fetched) < w.ttl()) {
		return it.v, nil
	}
	if ok && justUnavailable && now.Sub(it.fetched) < w.feed().Staleness() {
		// What the read would most likely end in, without the wait.
		return it.v, nil
	}
	v, err := c.Refresh(ctx, key, fetch)
	if err != nil && ok && Unavailable(err) && now.Sub(it.fetched) < w.feed().Staleness() {
		return it.v, nil
	}
	return v, err
}

// Refresh fetches key's value, bypassing memory, and keeps it unless a
// change arrived meanwhile (the value may predate it).
func (c *Cache[V]) Refresh(ctx context.Context, key string, fetch Fetch[V]) (V, error) {
	w := c.w
	w.mu.Lock()
	gen := w.gen
	w.mu.Unlock()
	fetched := w.now()
	v, deps, err := fetch(ctx)
	if err != nil {
		w.noteUnavailable(err)
		return v, err
	}
	// Checked and stored under c.mu: an invalidation bumps the generation
	// before it takes c.mu, so it either sees this entry or is seen here.
	// A value is kept unless a change since the fetch began touched what
	// it depends on: exactly what invalidate would have dropped.
	c.mu.Lock()
	w.mu.Lock()
	current := !w.touchedSince(gen, deps)
	w.mu.Unlock()
	if current {
		c.m.Set(key, item[V]{v: v, deps: deps, fetched: fetched, fetch: fetch})
	} else {
		c.m.Invalidate(key)
	}
	c.mu.Unlock()
	return v, nil
}

// invalidate drops every entry that depends on a changed object, then
// reads the dropped ones again in the background, so a busy client is in
// the cache again before a directory outage that follows a change.
func (c *Cache[V]) invalidate(changed map[string]bool, all bool) {
	type again struct {
		key   string
		fetch Fetch[V]
	}
	var refetch []again
	c.mu.Lock()
	for k, it := range c.m.All() {
		drop := all || len(it.deps) == 0
		for _, d := range it.deps {
			drop = drop || changed[string(d)]
		}
		if drop {
			c.m.Invalidate(k)
			if len(it.deps) > 0 && it.fetch != nil && len(refetch) < maxRefetch {
				refetch = append(refetch, again{k, it.fetch})
			}
		}
	}
	c.mu.Unlock()
	if len(refetch) == 0 {
		return
	}
	c.w.mu.Lock()
	ctx := c.w.runCtx
	c.w.mu.Unlock()
	if ctx == nil {
		ctx = context.Background()
	}
	c.refetching.Add(1)
	go func() {
		defer c.refetching.Done()
		for _, r := range refetch {
			if ctx.Err() != nil {
				return
			}
			fctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			_, _ = c.Refresh(fctx, r.key, r.fetch)
			cancel()
		}
	}()
}
