package session_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/gatehouse-id/gatehouse/pkg/db"
	"github.com/gatehouse-id/gatehouse/services/authn/internal/authntest"
	"github.com/gatehouse-id/gatehouse/services/authn/internal/session"
)

// TestDeviceAttempts: a browser is blocked after DeviceAttempts wrong
// codes within the window, another browser is not, and the window's end
// starts the count again; the pruner forgets old windows.
func TestDeviceAttempts(t *testing.T) {
	t.Parallel()
	authntest.Run(t, func(t *testing.T, d db.Dialect) {
		st, _, _ := newStore(t, d)
		ctx := context.Background()
		blocked := func(ua string, at time.Time) bool {
			t.Helper()
			b, err := st.DeviceBlocked(ctx, ua, at)
			if err != nil {
				t.Fatal(err)
			}
			return b
		}
		for i := range session.DeviceAttempts {
			if blocked("ua-1", t0.Add(time.Duration(i)*time.Second)) {
				t.Fatalf("blocked after %d wrong codes", i)
			}
			if err := st.DeviceFailed(ctx, "ua-1", t0.Add(time.Duration(i)*time.Second)); err != nil {
				t.Fatal(err)
			}
		}
		if !blocked("ua-1", t0.Add(time.Minute)) || blocked("ua-2", t0.Add(time.Minute)) {
			t.Fatal("want ua-1 blocked and ua-2 not")
		}
		later := t0.Add(session.DeviceAttemptWindow + time.Second)
		if blocked("ua-1", later) {
			t.Fatal("still blocked after the window")
		}
		if err := st.DeviceFailed(ctx, "ua-1", later); err != nil {
			t.Fatal(err)
		}
		if blocked("ua-1", later.Add(time.Second)) {
			t.Fatal("a new window starts at one")
		}
		if _, err := st.Prune(ctx, later.Add(session.DeviceAttemptWindow+time.Second)); err != nil {
			t.Fatal(err)
		}
		if n := rows(t, st, "device_attempts"); n != 0 {
			t.Fatalf("%d attempt rows after pruning", n)
		}
	})
}

// TestTakePushed: a pushed request is taken once, by its client, before
// it expires; of parallel takes one wins.
func TestTakePushed(t *testing.T) {
	t.Parallel()
	authntest.Run(t, func(t *testing.T, d db.Dialect) {
		st, _, _ := newStore(t, d)
		ctx := context.Background()
		push := func(uri string) {
			t.Helper()
			if err := st.Push(ctx, session.PushedRequest{URI: uri, ClientID: "web", Params: []byte(`{"a":["b"]}`),
				CreatedAt: t0, ExpiresAt: t0.Add(time.Minute)}); err != nil {
				t.Fatal(err)
			}
		}
		push("urn:1")
		if _, err := st.TakePushed(ctx, "urn:1", "spa", t0); !errors.Is(err, session.ErrNotFound) {
			t.Fatalf("another client: %v", err)
		}
		if _, err := st.TakePushed(ctx, "urn:1", "web", t0.Add(time.Minute)); !errors.Is(err, session.ErrNotFound) {
			t.Fatalf("expired: %v", err)
		}
		push("urn:2")
		var wg sync.WaitGroup
		var mu sync.Mutex
		won := 0
		for range 8 {
			wg.Go(func() {
				p, err := st.TakePushed(ctx, "urn:2", "web", t0)
				if err == nil && string(p) == `{"a":["b"]}` {
					mu.Lock()
					won++
					mu.Unlock()
				} else if !errors.Is(err, session.ErrNotFound) {
					t.Error(err)
				}
			})
		}
		wg.Wait()
		if won != 1 {
			t.Fatalf("%d parallel takes won; want 1", won)
		}
	})
}
