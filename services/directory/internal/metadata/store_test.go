package metadata_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"connectrpc.com/connect"

	"github.com/gatehouse-id/gatehouse/pkg/db"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/eventstore"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/metadata"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/orgs"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/projections"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/storetest"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/textquery"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/users"
)

type fixture struct {
	t   *testing.T
	es  *eventstore.Store
	uq  *users.Queries
	q   *metadata.Queries
	cmd *metadata.Commands
}

func newFixture(t *testing.T, d db.Dialect) *fixture {
	st := storetest.Open(t, d)
	es := eventstore.New(st, nil)
	projections.RegisterAll(es)
	q := &metadata.Queries{DB: st}
	return &fixture{t: t, es: es, uq: &users.Queries{DB: st}, q: q, cmd: &metadata.Commands{ES: es, Q: q}}
}

// newUser adds an organization with one user and returns the user as read.
func (f *fixture) newUser(name string) *users.User {
	f.t.Helper()
	ctx := context.Background()
	orgID, _, err := (&orgs.Commands{ES: f.es, IssuerHost: "localhost"}).AddOrg(ctx, "test", name, nil)
	if err != nil {
		f.t.Fatal(err)
	}
	org, err := (&orgs.Queries{DB: f.es.DB()}).Get(ctx, orgID)
	if err != nil {
		f.t.Fatal(err)
	}
	id, _, err := (&users.Commands{ES: f.es, Q: f.uq}).AddHuman(ctx, "test", org, users.HumanAdded{UserName: name, FirstName: "F", LastName: "L", DisplayName: "F L"})
	if err != nil {
		f.t.Fatal(err)
	}
	return f.user(id)
}

func (f *fixture) user(id string) *users.User {
	f.t.Helper()
	u, err := f.uq.Get(context.Background(), id)
	if err != nil {
		f.t.Fatal(err)
	}
	return u
}

func (f *fixture) keys(userID string) []string {
	f.t.Helper()
	k, err := f.q.Keys(context.Background(), userID)
	if err != nil {
		f.t.Fatal(err)
	}
	slices.Sort(k)
	return k
}

func TestCommandsAndQueries(t *testing.T) {
	storetest.Run(t, func(t *testing.T, d db.Dialect) {
		ctx := context.Background()
		f := newFixture(t, d)

		t.Run("set adds, replaces and moves the user on", func(t *testing.T) {
			u := f.newUser("setter")
			evs, err := f.cmd.Set(ctx, "editor", u, []metadata.Entry{{Key: "a", Value: []byte("1")}, {Key: "b", Value: []byte("2")}})
			if err != nil {
				t.Fatal(err)
			}
			if len(evs) != 2 || evs[0].Type != users.EventMetadataSet || evs[0].AggregateType != users.Aggregate ||
				evs[0].AggregateID != u.ID || evs[0].ResourceOwner != u.OrgID || evs[1].Version != u.Version+2 {
				t.Fatalf("events %+v; want two %s events of user %s at versions %d, %d", evs, users.EventMetadataSet, u.ID, u.Version+1, u.Version+2)
			}
			a, err := f.q.Get(ctx, u.ID, "a")
			if err != nil {
				t.Fatal(err)
			}
			if string(a.Value) != "1" || a.OrgID != u.OrgID || a.Sequence != evs[0].Sequence ||
				!a.CreationDate.Equal(evs[0].CreatedAt) || !a.ChangeDate.Equal(evs[0].CreatedAt) {
				t.Fatalf("entry a = %+v; want value 1 with the details of event %d", a, evs[0].Sequence)
			}
			after := f.user(u.ID)
			if after.Version != evs[1].Version || after.Sequence != evs[1].Sequence || !after.ChangeDate.Equal(evs[1].CreatedAt) {
				t.Fatalf("user version/sequence/change %d/%d/%v; want %d/%d/%v", after.Version, after.Sequence, after.ChangeDate,
					evs[1].Version, evs[1].Sequence, evs[1].CreatedAt)
			}

			// Replacing keeps the creation date.
			again, err := f.cmd.Set(ctx, "editor", after, []metadata.Entry{{Key: "a", Value: []byte("one")}})
			if err != nil {
				t.Fatal(err)
			}
			a2, _ := f.q.Get(ctx, u.ID, "a")
			if string(a2.Value) != "one" || !a2.CreationDate.Equal(a.CreationDate) || a2.Sequence != again[0].Sequence || !a2.ChangeDate.Equal(again[0].CreatedAt) {
				t.Fatalf("replaced entry %+v; want value one, creation %v, sequence %d", a2, a.CreationDate, again[0].Sequence)
			}

			// A stale user version is refused and writes nothing.
			_, err = f.cmd.Set(ctx, "editor", after, []metadata.Entry{{Key: "c", Value: []byte("3")}})
			if connect.CodeOf(err) != connect.CodeAborted {
				t.Fatalf("set at a stale version: %v; want Aborted", err)
			}
			// Invalid entries are refused before anything is written.
			_, err = f.cmd.Set(ctx, "editor", f.user(u.ID), []metadata.Entry{{Key: "c", Value: []byte("3")}, {Key: "d"}})
			if connect.CodeOf(err) != connect.CodeInvalidArgument {
				t.Fatalf("set with an empty value: %v; want InvalidArgument", err)
			}
			if got := f.keys(u.ID); !slices.Equal(got, []string{"a", "b"}) {
				t.Fatalf("keys %v; want [a b]", got)
			}
			if _, err := f.q.Get(ctx, u.ID, "c"); !errors.Is(err, db.ErrNotFound) {
				t.Fatalf("Get unknown key: %v; want db.ErrNotFound", err)
			}
		})

		t.Run("remove is all or nothing", func(t *testing.T) {
			u := f.newUser("remover")
			if _, err := f.cmd.Set(ctx, "editor", u, []metadata.Entry{{Key: "a", Value: []byte("1")}, {Key: "b", Value: []byte("2")}, {Key: "c", Value: []byte("3")}}); err != nil {
				t.Fatal(err)
			}
			u = f.user(u.ID)
			_, err := f.cmd.Remove(ctx, "editor", u, []string{"a", "nope", "b"})
			if connect.CodeOf(err) != connect.CodeNotFound {
				t.Fatalf("remove with an unknown key: %v; want NotFound", err)
			}
			if got := f.keys(u.ID); !slices.Equal(got, []string{"a", "b", "c"}) {
				t.Fatalf("keys after refused removal %v; want [a b c]", got)
			}
			evs, err := f.cmd.Remove(ctx, "editor", u, []string{"a", "b", "a"})
			if err != nil {
				t.Fatal(err)
			}
			if len(evs) != 2 || evs[0].Type != users.EventMetadataRemoved {
				t.Fatalf("events %+v; want one removal per distinct key", evs)
			}
			if got := f.keys(u.ID); !slices.Equal(got, []string{"c"}) {
				t.Fatalf("keys %v; want [c]", got)
			}
			if after := f.user(u.ID); after.Version != evs[1].Version || after.Sequence != evs[1].Sequence {
				t.Fatalf("user version/sequence %d/%d; want %d/%d", after.Version, after.Sequence, evs[1].Version, evs[1].Sequence)
			}
		})

		t.Run("a removal of an unset key never lands", func(t *testing.T) {
			// Bypassing the command's check: the reducer refuses.
			u := f.newUser("bypass")
			_, err := f.es.Push(ctx, "editor", eventstore.Command{Aggregate: u.Aggregate(), Version: u.Version,
				Events: []eventstore.Pending{{Type: users.EventMetadataRemoved, Payload: map[string]string{"key": "ghost"}}}})
			if !errors.Is(err, db.ErrNotFound) {
				t.Fatalf("push removal of an unset key: %v; want db.ErrNotFound", err)
			}
			if n := len(mustEvents(t, f.es, u.ID)); n != 1 {
				t.Fatalf("user has %d events; want only its creation", n)
			}
		})

		t.Run("list filters, orders and pages", func(t *testing.T) {
			u := f.newUser("lister")
			var entries []metadata.Entry
			for _, k := range []string{"b.one", "a.two", "B.three", "c", "a.One"} {
				entries = append(entries, metadata.Entry{Key: k, Value: []byte("v-" + k)})
			}
			if _, err := f.cmd.Set(ctx, "editor", u, entries); err != nil {
				t.Fatal(err)
			}
			other := f.newUser("other-lister")
			if _, err := f.cmd.Set(ctx, "editor", other, []metadata.Entry{{Key: "a.zzz", Value: []byte("x")}}); err != nil {
				t.Fatal(err)
			}
			cases := []struct {
				name  string
				o     metadata.ListOptions
				want  []string
				total uint64
			}{
				{"all descending", metadata.ListOptions{Limit: 100}, []string{"c", "b.one", "a.two", "a.One", "B.three"}, 5},
				{"all ascending", metadata.ListOptions{Limit: 100, Asc: true}, []string{"B.three", "a.One", "a.two", "b.one", "c"}, 5},
				{"page", metadata.ListOptions{Limit: 2, Offset: 1, Asc: true}, []string{"a.One", "a.two"}, 5},
				{"last page", metadata.ListOptions{Limit: 2, Offset: 4, Asc: true}, []string{"c"}, 5},
				{"past the end", metadata.ListOptions{Limit: 2, Offset: 5}, nil, 5},
				{"prefix", metadata.ListOptions{Limit: 100, Asc: true, Queries: []metadata.KeyQuery{{Text: "a.", Method: textquery.StartsWith}}}, []string{"a.One", "a.two"}, 2},
				{"prefix ignoring case", metadata.ListOptions{Limit: 100, Asc: true, Queries: []metadata.KeyQuery{{Text: "b.", Method: textquery.StartsWithIgnoreCase}}}, []string{"B.three", "b.one"}, 2},
				{"all queries must match", metadata.ListOptions{Limit: 100, Asc: true, Queries: []metadata.KeyQuery{
					{Text: "one", Method: textquery.EndsWithIgnoreCase}, {Text: "a", Method: textquery.StartsWith}}}, []string{"a.One"}, 1},
				{"none match", metadata.ListOptions{Limit: 100, Queries: []metadata.KeyQuery{{Text: "zzz", Method: textquery.Contains}}}, nil, 0},
			}
			for _, tc := range cases {
				rows, total, err := f.q.List(ctx, u.ID, tc.o)
				if err != nil {
					t.Fatalf("%s: %v", tc.name, err)
				}
				var got []string
				for _, r := range rows {
					got = append(got, r.Key)
					if string(r.Value) != "v-"+r.Key || r.UserID != u.ID {
						t.Errorf("%s: row %+v; want value v-%s of user %s", tc.name, r, r.Key, u.ID)
					}
				}
				if !slices.Equal(got, tc.want) || total != tc.total {
					t.Errorf("%s: keys %v total %d; want %v total %d", tc.name, got, total, tc.want, tc.total)
				}
			}
		})
	})
}

func mustEvents(t *testing.T, es *eventstore.Store, id string) []eventstore.Event {
	t.Helper()
	evs, err := es.Events(context.Background(), eventstore.Filter{AggregateID: id})
	if err != nil {
		t.Fatal(fmt.Errorf("events of %s: %w", id, err))
	}
	return evs
}
