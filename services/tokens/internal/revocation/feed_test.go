package revocation

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestFeed: every unexpired revocation is listed once settled, in the
// order recorded (ties by id); the cursor never passes a young one, so it
// comes again until it has settled.
func TestFeed(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		l := e.replica(t)
		if err := l.RevokeMany(ctx, []string{"b", "a"}, []time.Time{t0.Add(time.Hour), t0.Add(time.Hour)}); err != nil {
			t.Fatal(err)
		}
		mustRevoke(t, l, "short", t0.Add(time.Second))
		e.clock.Advance(SettleTime + time.Second)
		mustRevoke(t, l, "young", t0.Add(time.Hour))

		ids := func(es []Entry) (out []string) {
			for _, x := range es {
				out = append(out, x.ID)
			}
			return out
		}
		es, cursor, more, err := l.Feed(ctx, "")
		if err != nil || more {
			t.Fatalf("Feed: %v, more %v", err, more)
		}
		if got := ids(es); len(got) != 3 || got[0] != "a" || got[1] != "b" || got[2] != "young" {
			t.Fatalf("Feed(\"\") = %v; want [a b young] (short has expired)", got)
		}
		es, cursor2, _, err := l.Feed(ctx, cursor)
		if err != nil || len(es) != 1 || es[0].ID != "young" || cursor2 != cursor {
			t.Fatalf("Feed(cursor) = %v, %q, %v; want young again, cursor unchanged", ids(es), cursor2, err)
		}
		e.clock.Advance(SettleTime + time.Second)
		es, cursor3, _, err := l.Feed(ctx, cursor)
		if err != nil || len(es) != 1 || cursor3 == cursor {
			t.Fatalf("settled: %v, %q, %v; want young and a new cursor", ids(es), cursor3, err)
		}
		if es, _, _, err := l.Feed(ctx, cursor3); err != nil || len(es) != 0 {
			t.Fatalf("after the last: %v, %v; want nothing", ids(es), err)
		}
		if _, _, _, err := l.Feed(ctx, "nonsense"); !errors.Is(err, ErrInvalidCursor) {
			t.Fatalf("bad cursor: %v", err)
		}
	})
}
