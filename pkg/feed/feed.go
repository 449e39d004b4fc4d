// Package feed follows a feed another service publishes (the directory's
// change feed, the tokens service's revocation list) and says how far what
// was read from it can be trusted: in sync (every change but those of the
// last poll is seen), stale (the publisher is unreachable; what was read
// serves, for a bounded time) or unknown (never read, or too long ago).
//
// One Follower holds the clocks and knobs every follower shares: the poll
// interval, the in-sync window (three intervals), the longest a stale
// state may serve (MaxStale), the start grace before an unreachable
// publisher is logged, and the one-line-per-outage logging.
package feed

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/gatehouse-id/gatehouse/pkg/telemetry"
)

// Defaults.
const (
	DefaultInterval = time.Second
	DefaultMaxStale = 15 * time.Minute
	// DefaultStartGrace is how long Run stays quiet about an unreachable
	// publisher before the first sync: the services of one deployment
	// start in any order.
	DefaultStartGrace = 10 * time.Second
)

// State is how far what was read from the feed can be trusted.
type State int

// States.
const (
	// InSync: the last read reached the head less than three intervals ago.
	InSync State = iota
	// Stale: the publisher is unreachable; what was read serves until
	// MaxStale after the last sync.
	Stale
	// Unknown: never synced, or longer ago than MaxStale.
	Unknown
)

func (s State) String() string {
	return [...]string{InSync: "in sync", Stale: "stale", Unknown: "unknown"}[s]
}

// Follower polls a feed every Interval and tracks when it last reached the
// head.
type Follower struct {
	// Name names the feed in logs ("directory change feed").
	Name string
	// Read reads the feed to its head once.
	Read func(ctx context.Context) error
	// Interval between polls; DefaultInterval when 0.
	Interval time.Duration
	// MaxStale bounds how long after the last sync a stale state serves;
	// DefaultMaxStale when 0.
	MaxStale time.Duration
	// StartGrace: DefaultStartGrace when 0.
	StartGrace time.Duration
	// Serving says, in the outage warning, what keeps working meanwhile.
	Serving string
	// Now is the clock (time.Now when nil).
	Now    func() time.Time
	Logger *slog.Logger

	mu      sync.Mutex
	started bool
	synced  time.Time
	down    bool
}

func (f *Follower) now() time.Time {
	if f.Now != nil {
		return f.Now()
	}
	return time.Now()
}

// Period is the poll interval in effect.
func (f *Follower) Period() time.Duration {
	if f.Interval > 0 {
		return f.Interval
	}
	return DefaultInterval
}

// Staleness is MaxStale in effect.
func (f *Follower) Staleness() time.Duration {
	if f.MaxStale > 0 {
		return f.MaxStale
	}
	return DefaultMaxStale
}

// State reports how far what was read can be trusted now.
func (f *Follower) State() State {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.started {
		return Unknown
	}
	switch age := f.now().Sub(f.synced); {
	case age < 3*f.Period():
		return InSync
	case age < f.Staleness():
		return Stale
	}
	return Unknown
}

// InSync reports whether State is InSync.
func (f *Follower) InSync() bool { return f.State() == InSync }

// Down reports whether the last poll failed.
func (f *Follower) Down() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.down
}

// Poll reads the feed to its head once and records the sync.
func (f *Follower) Poll(ctx context.Context) error {
	err := f.Read(ctx)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.down = err != nil
	if err == nil {
		f.started, f.synced = true, f.now()
	}
	return err
}

// Run polls every Interval until ctx ends, logging an unreachable
// publisher once per outage (before the first sync only once it has been
// unreachable for StartGrace). every, when not nil, runs after each poll.
func (f *Follower) Run(ctx context.Context, every func()) {
	t := time.NewTicker(f.Period())
	defer t.Stop()
	began, warned := time.Now(), false
	grace := f.StartGrace
	if grace == 0 {
		grace = DefaultStartGrace
	}
	for {
		err := f.Poll(ctx)
		f.mu.Lock()
		synced := f.started
		f.mu.Unlock()
		switch {
		case err != nil && !warned && ctx.Err() == nil && (synced || time.Since(began) >= grace):
			f.logger().WarnContext(ctx, f.Name+" unreachable; "+f.Serving+" for a bounded time",
				"max_stale", f.Staleness().String(), "err", err)
			warned = true
		case err == nil && warned:
			f.logger().InfoContext(ctx, f.Name+" in sync again")
			warned = false
		}
		if every != nil {
			every()
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Metric publishes, as name, a gauge that is 1 while the follower is not
// in sync.
func (f *Follower) Metric(name, description string) error {
	return telemetry.Flag(name, description, func() bool { return !f.InSync() })
}

func (f *Follower) logger() *slog.Logger {
	if f.Logger != nil {
		return f.Logger
	}
	return slog.Default()
}
