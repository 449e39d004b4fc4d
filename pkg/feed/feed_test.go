package feed

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// publisher is a feed that is down until up.
type publisher struct {
	mu    sync.Mutex
	up    bool
	reads int
}

func (p *publisher) read(context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.reads++
	if !p.up {
		return errors.New("connection refused")
	}
	return nil
}

func (p *publisher) setUp(up bool) { p.mu.Lock(); p.up = up; p.mu.Unlock() }

// The state follows the last sync: in sync for three intervals, then
// stale until MaxStale, then unknown.
func TestStates(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		p := &publisher{up: true}
		f := &Follower{Name: "feed", Read: p.read, Interval: time.Second, MaxStale: time.Minute}
		if f.State() != Unknown {
			t.Fatalf("before the first poll: %v", f.State())
		}
		if err := f.Poll(context.Background()); err != nil {
			t.Fatal(err)
		}
		synced := time.Now()
		for _, step := range []struct {
			after time.Duration
			want  State
		}{{0, InSync}, {2999 * time.Millisecond, InSync}, {time.Millisecond, Stale}, {57 * time.Second, Unknown}} {
			time.Sleep(step.after)
			if got := f.State(); got != step.want {
				t.Fatalf("%v after the sync: %v; want %v", time.Since(synced), got, step.want)
			}
		}
		p.setUp(false)
		if err := f.Poll(context.Background()); err == nil || !f.Down() {
			t.Fatalf("poll of a down feed: %v, down %v", err, f.Down())
		}
	})
}

// At the start, a publisher not up yet is not an outage worth a warning (in
// the embedded process directory starts before tokens): Run stays quiet
// for StartGrace, and warns once if it is still unreachable then; it says
// so when the feed is back.
func TestRunQuietWhilePublisherStarts(t *testing.T) {
	t.Parallel()
	run := func(t *testing.T, grace, upAfter time.Duration) string {
		var logs bytes.Buffer
		synctest.Test(t, func(t *testing.T) {
			p := &publisher{}
			f := &Follower{Name: "revocation list", Read: p.read, Interval: time.Second, StartGrace: grace,
				Serving: "checked tokens keep working", Logger: slog.New(slog.NewTextHandler(&logs, nil))}
			ctx, cancel := context.WithCancel(context.Background())
			polls := 0
			done := make(chan struct{})
			go func() { f.Run(ctx, func() { polls++ }); close(done) }()
			time.Sleep(upAfter)
			p.setUp(true)
			time.Sleep(2 * time.Second)
			cancel()
			<-done
			if !f.InSync() || polls < 2 {
				t.Errorf("after %d polls: %v; want in sync", polls, f.State())
			}
		})
		return logs.String()
	}
	if out := run(t, time.Minute, 5*time.Second); strings.Contains(out, "level=WARN") {
		t.Errorf("publisher up after a few polls, within the grace: logged\n%s", out)
	}
	out := run(t, 10*time.Second, 30*time.Second)
	if strings.Count(out, "revocation list unreachable; checked tokens keep working for a bounded time") != 1 ||
		strings.Count(out, "revocation list in sync again") != 1 {
		t.Errorf("publisher up after the grace: logged\n%s\nwant one warning, then one recovery", out)
	}
}
