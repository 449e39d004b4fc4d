package eventstore_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/gatehouse-id/gatehouse/pkg/db"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/eventstore"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/storetest"
)

type memberAdded struct {
	UserID string `json:"userId"`
}

// newStore registers a reducer projecting "member.added" into
// instance_members (user_id is unique) and "fail" into an error.
func newStore(t *testing.T, d db.Dialect) *eventstore.Store {
	st := storetest.Open(t, d)
	es := eventstore.New(st, nil)
	es.Register("member.added", func(ctx context.Context, tx db.Querier, e eventstore.Event) error {
		var p memberAdded
		if err := e.Unmarshal(&p); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `INSERT INTO instance_members (user_id, roles, creation_date, change_date, sequence) VALUES (?, '[]', ?, ?, ?)`,
			p.UserID, e.CreatedAt, e.CreatedAt, e.Sequence)
		return err
	})
	es.Register("fail", func(context.Context, db.Querier, eventstore.Event) error { return errors.New("boom") })
	return es
}

func agg(id string) eventstore.Aggregate {
	return eventstore.Aggregate{Type: "instance", ID: id, ResourceOwner: "org1"}
}

func count(t *testing.T, es *eventstore.Store, q string) int {
	var n int
	if err := es.DB().Get(context.Background(), &n, q); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T, d db.Dialect) {
		ctx := context.Background()
		t.Run("push appends, reduces and returns details", func(t *testing.T) {
			es := newStore(t, d)
			evs, err := es.Push(ctx, "editor1", eventstore.Command{Aggregate: agg("a1"), Version: 0, Events: []eventstore.Pending{
				{Type: "member.added", Payload: memberAdded{UserID: "u1"}},
				{Type: "member.added", Payload: memberAdded{UserID: "u2"}},
			}})
			if err != nil {
				t.Fatal(err)
			}
			if len(evs) != 2 || evs[0].Version != 1 || evs[1].Version != 2 || evs[1].Sequence <= evs[0].Sequence {
				t.Fatalf("events = %+v; want versions 1,2 and increasing sequences", evs)
			}
			if !evs[0].CreatedAt.Equal(evs[1].CreatedAt) || evs[0].CreatedAt.Location() != time.UTC {
				t.Fatalf("created_at %v / %v; want one UTC timestamp per push", evs[0].CreatedAt, evs[1].CreatedAt)
			}
			if n := count(t, es, `SELECT COUNT(*) FROM instance_members`); n != 2 {
				t.Fatalf("projection rows = %d; want 2", n)
			}
			stored, err := es.Events(ctx, eventstore.Filter{AggregateID: "a1"})
			if err != nil {
				t.Fatal(err)
			}
			if len(stored) != 2 || stored[1].Sequence != evs[1].Sequence || !stored[1].CreatedAt.Equal(evs[1].CreatedAt) || stored[0].Editor != "editor1" || stored[0].ResourceOwner != "org1" {
				t.Fatalf("stored = %+v; want what Push returned", stored)
			}
			var p memberAdded
			if err := stored[1].Unmarshal(&p); err != nil || p.UserID != "u2" {
				t.Fatalf("payload %+v %v", p, err)
			}
		})
		t.Run("stale version is ErrConcurrent and changes nothing", func(t *testing.T) {
			es := newStore(t, d)
			if _, err := es.Push(ctx, "e", eventstore.Command{Aggregate: agg("a1"), Events: []eventstore.Pending{{Type: "member.added", Payload: memberAdded{"u1"}}}}); err != nil {
				t.Fatal(err)
			}
			_, err := es.Push(ctx, "e", eventstore.Command{Aggregate: agg("a1"), Version: 0, Events: []eventstore.Pending{{Type: "member.added", Payload: memberAdded{"u2"}}}})
			if !errors.Is(err, eventstore.ErrConcurrent) {
				t.Fatalf("err = %v; want ErrConcurrent", err)
			}
			if n := count(t, es, `SELECT COUNT(*) FROM events`); n != 1 {
				t.Fatalf("events = %d; want 1", n)
			}
		})
		t.Run("reducer failure rolls back every command", func(t *testing.T) {
			es := newStore(t, d)
			_, err := es.Push(ctx, "e",
				eventstore.Command{Aggregate: agg("a1"), Events: []eventstore.Pending{{Type: "member.added", Payload: memberAdded{"u1"}}}},
				eventstore.Command{Aggregate: agg("a2"), Events: []eventstore.Pending{{Type: "fail", Payload: struct{}{}}}})
			if err == nil {
				t.Fatal("push succeeded")
			}
			if n := count(t, es, `SELECT COUNT(*) FROM events`) + count(t, es, `SELECT COUNT(*) FROM instance_members`); n != 0 {
				t.Fatalf("rows left after failed push: %d", n)
			}
		})
		t.Run("projection unique violation is ErrUnique", func(t *testing.T) {
			es := newStore(t, d)
			if _, err := es.Push(ctx, "e", eventstore.Command{Aggregate: agg("a1"), Events: []eventstore.Pending{{Type: "member.added", Payload: memberAdded{"u1"}}}}); err != nil {
				t.Fatal(err)
			}
			_, err := es.Push(ctx, "e", eventstore.Command{Aggregate: agg("a2"), Events: []eventstore.Pending{{Type: "member.added", Payload: memberAdded{"u1"}}}})
			if !errors.Is(err, eventstore.ErrUnique) {
				t.Fatalf("err = %v; want ErrUnique", err)
			}
			if n := count(t, es, `SELECT COUNT(*) FROM events`); n != 1 {
				t.Fatalf("events = %d; want 1", n)
			}
		})
		t.Run("unknown event type is refused", func(t *testing.T) {
			es := newStore(t, d)
			if _, err := es.Push(ctx, "e", eventstore.Command{Aggregate: agg("a1"), Events: []eventstore.Pending{{Type: "nope", Payload: 1}}}); err == nil {
				t.Fatal("event without reducer stored")
			}
		})
		t.Run("concurrent writers: exactly one wins", func(t *testing.T) {
			es := newStore(t, d)
			const n = 8
			var wg sync.WaitGroup
			errs := make([]error, n)
			for i := range n {
				wg.Go(func() {
					_, errs[i] = es.Push(ctx, "e", eventstore.Command{Aggregate: agg("shared"), Version: 0,
						Events: []eventstore.Pending{{Type: "member.added", Payload: memberAdded{UserID: string(rune('a' + i))}}}})
				})
			}
			wg.Wait()
			wins := 0
			for _, err := range errs {
				switch {
				case err == nil:
					wins++
				case !errors.Is(err, eventstore.ErrConcurrent):
					t.Errorf("loser err = %v; want ErrConcurrent", err)
				}
			}
			if wins != 1 {
				t.Fatalf("%d writers won; want exactly 1", wins)
			}
			if n := count(t, es, `SELECT COUNT(*) FROM instance_members`); n != 1 {
				t.Fatalf("projection rows = %d; want 1", n)
			}
		})
	})
}

// Changes: 0 starts at the newest settled change; unsettled changes come
// back on every call until they settle, and the cursor never passes one.
func TestChanges(t *testing.T) {
	storetest.Run(t, func(t *testing.T, d db.Dialect) {
		ctx := context.Background()
		es := newStore(t, d)
		push := func(id, user string) uint64 {
			t.Helper()
			evs, err := es.Push(ctx, "e", eventstore.Command{Aggregate: agg(id), Events: []eventstore.Pending{{Type: "member.added", Payload: memberAdded{user}}}})
			if err != nil {
				t.Fatal(err)
			}
			return evs[0].Sequence
		}
		old := push("a1", "u1")
		mid := time.Now().Add(time.Second)
		time.Sleep(1100 * time.Millisecond)
		fresh := push("a2", "u2")

		// From the present: the settled change is skipped, the fresh one is
		// listed, and the cursor stays at the settled head.
		cs, cursor, err := es.Changes(ctx, 0, mid.Add(time.Millisecond), 10)
		if err != nil {
			t.Fatal(err)
		}
		if len(cs) != 1 || cs[0].Sequence != fresh || cs[0].ResourceOwner != "org1" || cs[0].EventType != "member.added" || cursor != old {
			t.Fatalf("Changes(0) = %+v, cursor %d; want only %d and cursor %d", cs, cursor, fresh, old)
		}
		// Once settled, the cursor moves past it.
		cs, cursor, err = es.Changes(ctx, old, time.Now().Add(time.Second), 10)
		if err != nil || len(cs) != 1 || cursor != fresh {
			t.Fatalf("Changes(%d) later = %+v, cursor %d, %v; want %d and cursor %d", old, cs, cursor, err, fresh, fresh)
		}
		// A limit keeps the rest for the next call.
		push("a3", "u3")
		cs, _, err = es.Changes(ctx, old, time.Now().Add(time.Second), 1)
		if err != nil || len(cs) != 1 || cs[0].Sequence != fresh {
			t.Fatalf("Changes with limit 1 = %+v, %v", cs, err)
		}
	})
}
