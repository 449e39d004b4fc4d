package backchannel_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	directoryv1 "github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/directory/v1"
	"github.com/gatehouse-id/gatehouse/services/tokens/internal/backchannel"
	"github.com/gatehouse-id/gatehouse/services/tokens/internal/store"
)

// memStore is the outbox in memory, with the store's semantics, for Run
// on a fake clock.
type memStore struct {
	mu   sync.Mutex
	rows map[string]*store.Logout
}

func (m *memStore) add(l store.Logout) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.rows[l.SessionID+"/"+l.ClientID] = &l
}

func (m *memStore) len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.rows)
}

func (m *memStore) DueLogouts(_ context.Context, now time.Time, limit int) ([]store.Logout, time.Time, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var due []store.Logout
	var next time.Time
	for _, r := range m.rows {
		switch {
		case !r.NextAttemptAt.After(now):
			due = append(due, *r)
		case next.IsZero() || r.NextAttemptAt.Before(next):
			next = r.NextAttemptAt
		}
	}
	slices.SortFunc(due, func(a, b store.Logout) int { return a.NextAttemptAt.Compare(b.NextAttemptAt) })
	return due[:min(len(due), limit)], next, nil
}

func (m *memStore) ClaimLogout(_ context.Context, l *store.Logout, now, until time.Time) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r := m.rows[l.SessionID+"/"+l.ClientID]
	if r == nil || r.NextAttemptAt.After(now) {
		return false, nil
	}
	r.NextAttemptAt = until
	r.Attempts++
	l.Attempts = r.Attempts
	return true, nil
}

func (m *memStore) RetryLogout(_ context.Context, l store.Logout, at time.Time) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r := m.rows[l.SessionID+"/"+l.ClientID]
	if r == nil || r.Attempts != l.Attempts {
		return false, nil
	}
	r.NextAttemptAt = at
	return true, nil
}

func (m *memStore) DeleteLogout(_ context.Context, l store.Logout) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.rows, l.SessionID+"/"+l.ClientID)
	return nil
}

type fakeSigner struct{}

func (fakeSigner) SignLogoutToken([]byte) (string, error) { return "h.p.s", nil }

// calls is a receiver without a network: each POST's time, answered with
// 500 for clients listed in failing (once each) and 200 otherwise.
type calls struct {
	mu      sync.Mutex
	at      map[string][]time.Time
	failing map[string]bool
}

func (c *calls) RoundTrip(req *http.Request) (*http.Response, error) {
	client := strings.TrimPrefix(req.URL.Path, "/")
	c.mu.Lock()
	defer c.mu.Unlock()
	c.at[client] = append(c.at[client], time.Now())
	status := http.StatusOK
	if c.failing[client] {
		status, c.failing[client] = http.StatusInternalServerError, false
	}
	return &http.Response{StatusCode: status, Body: io.NopCloser(strings.NewReader("")), Header: http.Header{}, Request: req}, nil
}

func (c *calls) of(client string) []time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.at[client])
}

// Run delivers at once when kicked, retries a failure when its backoff
// ends (not at the next sweep), and finds a logout queued without a kick
// (another replica's) at the next sweep.
func TestRunKicksRetriesAndSweeps(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := &memStore{rows: map[string]*store.Logout{}}
		rt := &calls{at: map[string][]time.Time{}, failing: map[string]bool{"flaky": true}}
		dir := &directory{clients: map[string]*directoryv1.Client{}}
		for _, c := range []string{"flaky", "quiet"} {
			dir.put(c, "https://rp.example/"+c)
		}
		o := &backchannel.Outbox{Issuer: issuer, Store: st, Clients: dir, Signer: fakeSigner{}, HTTP: &http.Client{Transport: rt},
			Sweep: 30 * time.Second, Now: time.Now, Logger: slog.New(slog.DiscardHandler)}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			o.Run(ctx)
		}()
		synctest.Wait()

		t0 := time.Now()
		st.add(store.Logout{SessionID: "sid", ClientID: "flaky", UserID: "alice", CreatedAt: t0, NextAttemptAt: t0})
		o.Kick()
		synctest.Wait()
		if got := rt.of("flaky"); len(got) != 1 || !got[0].Equal(t0) {
			t.Fatalf("kicked: tries at %v; want one at once", got)
		}
		time.Sleep(2 * time.Second)
		synctest.Wait()
		got := rt.of("flaky")
		if len(got) != 2 || got[1].Sub(t0) < 500*time.Millisecond || got[1].Sub(t0) > time.Second || st.len() != 0 {
			t.Fatalf("tries at +%v, %d queued; want a second try 0.5 s to 1 s after the 500, delivered", offsets(got, t0), st.len())
		}

		// Queued without a kick: found by the sweep, 30 s after the last
		// round (the retry, at most 1 s after t0).
		t1 := time.Now()
		st.add(store.Logout{SessionID: "sid", ClientID: "quiet", UserID: "alice", CreatedAt: t1, NextAttemptAt: t1})
		time.Sleep(25 * time.Second)
		synctest.Wait()
		if n := len(rt.of("quiet")); n != 0 {
			t.Fatalf("delivered %d times before the sweep", n)
		}
		time.Sleep(10 * time.Second)
		synctest.Wait()
		if q := rt.of("quiet"); len(q) != 1 || q[0].Sub(got[1]) != 30*time.Second {
			t.Fatalf("tries at %v; want one at the sweep, 30 s after the last round", offsets(q, got[1]))
		}
		cancel()
		<-done
	})
}

func offsets(ts []time.Time, from time.Time) []time.Duration {
	out := make([]time.Duration, len(ts))
	for i, t := range ts {
		out[i] = t.Sub(from)
	}
	return out
}
