// Package cache makes the bounded in-memory caches of Gatehouse's services:
// otter caches (a well-kept W-TinyLFU cache: a burst of distinct keys
// evicts the coldest entries, never the whole cache) whose entries may
// expire at their own time, with their hits and misses published as
// gatehouse.cache.requests{cache,result}. What must drop entries when the
// directory changes (dircache) layers its feed-driven invalidation over
// one.
package cache

import (
	"context"
	"sync"
	"time"

	"github.com/maypok86/otter/v2"
	"github.com/maypok86/otter/v2/stats"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// Options of a cache.
type Options[K comparable, V any] struct {
	// Name is the cache's name in metrics ("verified_tokens").
	Name string
	// Size bounds the number of entries.
	Size int
	// ExpiresAt, when not nil, gives the time an entry stops being
	// served (a zero time: never). Entries are dropped then, not kept
	// until evicted.
	ExpiresAt func(K, V) time.Time
	// IdleFor, when positive, drops an entry that has not been read or
	// written for that long (ExpiresAt must then be nil).
	IdleFor time.Duration
	// Now is the clock entries expire by (time.Now when nil): an entry
	// lives for what remained of it when it was written. A clock given
	// here drives expiry alone, with no periodic clean-up: expired entries
	// are dropped as they are met, and Size still bounds them.
	Now func() time.Time
}

// New returns a cache.
func New[K comparable, V any](o Options[K, V]) *otter.Cache[K, V] {
	if o.ExpiresAt != nil && o.IdleFor > 0 {
		panic("cache: ExpiresAt and IdleFor are exclusive")
	}
	counter := stats.NewCounter()
	// Maintenance (applying buffered reads and writes, evicting) runs on
	// the goroutine that triggers it rather than a new one: eviction then
	// follows the reads before it, so a burst of new keys cannot evict a
	// key read all along before its reads are counted.
	opts := &otter.Options[K, V]{MaximumSize: o.Size, StatsRecorder: counter, Executor: func(fn func()) { fn() }}
	now := o.Now
	if now == nil {
		now = time.Now
	} else {
		opts.Clock = clock(now)
	}
	if o.IdleFor > 0 {
		opts.ExpiryCalculator = otter.ExpiryAccessing[K, V](o.IdleFor)
	}
	if o.ExpiresAt != nil {
		opts.ExpiryCalculator = otter.ExpiryWritingFunc(func(e otter.Entry[K, V]) time.Duration {
			at := o.ExpiresAt(e.Key, e.Value)
			if at.IsZero() {
				return 100 * 365 * 24 * time.Hour
			}
			return max(at.Sub(now()), time.Nanosecond)
		})
	}
	register(o.Name, counter)
	return otter.Must(opts)
}

// clock is otter's view of a given clock; it sends no ticks, so expired
// entries are dropped when met rather than on a timer the clock does not
// drive.
type clock func() time.Time

func (c clock) NowNano() int64                      { return c().UnixNano() }
func (c clock) Tick(time.Duration) <-chan time.Time { return nil }

var (
	mu      sync.Mutex
	once    sync.Once
	entries = map[string][]*stats.Counter{}
)

// register publishes counter's hits and misses under name (caches of one
// name, such as one per service in the embedded process, add up).
func register(name string, counter *stats.Counter) {
	mu.Lock()
	entries[name] = append(entries[name], counter)
	mu.Unlock()
	once.Do(func() {
		_, _ = otel.Meter("github.com/gatehouse-id/gatehouse/pkg/cache").Int64ObservableCounter("gatehouse.cache.requests",
			metric.WithDescription("Reads of Gatehouse's in-memory caches, by cache and result (hit, miss)."),
			metric.WithInt64Callback(func(_ context.Context, o metric.Int64Observer) error {
				for name, s := range Snapshot() {
					c := attribute.String("cache", name)
					o.Observe(int64(s.Hits), metric.WithAttributes(c, attribute.String("result", "hit")))
					o.Observe(int64(s.Misses), metric.WithAttributes(c, attribute.String("result", "miss")))
				}
				return nil
			}))
	})
}

// Snapshot returns every cache's counts by name.
func Snapshot() map[string]stats.Stats {
	mu.Lock()
	defer mu.Unlock()
	out := make(map[string]stats.Stats, len(entries))
	for name, cs := range entries {
		var sum stats.Stats
		for _, c := range cs {
			sum = sum.Plus(c.Snapshot())
		}
		out[name] = sum
	}
	return out
}
