package dircache

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"connectrpc.com/connect"

	directoryv1 "github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/directory/v1"
)

// changeLog is a directory change feed; down makes it unavailable.
type changeLog struct {
	mu      sync.Mutex
	changes []*directoryv1.Change
	settled uint64 // cursor it reports
	down    bool
}

func (f *changeLog) ListChanges(_ context.Context, req *directoryv1.ListChangesRequest) (*directoryv1.ListChangesResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.down {
		return nil, connect.NewError(connect.CodeUnavailable, errors.New("down"))
	}
	after := req.GetAfterSequence()
	if after == 0 {
		after = f.settled
	}
	out := &directoryv1.ListChangesResponse{Cursor: f.settled}
	for _, c := range f.changes {
		if c.GetSequence() > after {
			out.Changes = append(out.Changes, c)
		}
	}
	return out, nil
}

// change records a change of object id ("" org: instance-wide).
func (f *changeLog) change(org, typ, id string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.changes = append(f.changes, &directoryv1.Change{Sequence: uint64(len(f.changes) + 1), OrgId: org, AggregateType: typ, AggregateId: id})
}

func (f *changeLog) setDown(down bool) { f.mu.Lock(); f.down = down; f.mu.Unlock() }

// source is the directory's data: key → (value, org); fails when down.
type source struct {
	mu    sync.Mutex
	vals  map[string]string
	orgs  map[string]string
	calls map[string]int
	down  bool
}

// fetch reads key; its value depends on the object named key and on the
// projects of its organization.
func (s *source) fetch(key string) Fetch[string] {
	return func(context.Context) (string, []Dep, error) {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.calls[key]++
		if s.down {
			return "", nil, connect.NewError(connect.CodeUnavailable, errors.New("down"))
		}
		v, ok := s.vals[key]
		if !ok {
			return "", nil, nil
		}
		return v, []Dep{Object(key), Object(s.orgs[key]), AnyOf(s.orgs[key], "project")}, nil
	}
}

func (s *source) set(key, val, org string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.vals[key], s.orgs[key] = val, org
}

func newSource() *source {
	return &source{vals: map[string]string{}, orgs: map[string]string{}, calls: map[string]int{}}
}
func (s *source) setDown(down bool)        { s.mu.Lock(); s.down = down; s.mu.Unlock() }
func (s *source) callCount(key string) int { s.mu.Lock(); defer s.mu.Unlock(); return s.calls[key] }
func mustGet(t *testing.T, c *Cache[string], src *source, key, want string) {
	t.Helper()
	got, err := c.Get(context.Background(), key, src.fetch(key))
	if err != nil || got != want {
		t.Fatalf("Get(%s) = %q, %v; want %q", key, got, err, want)
	}
}

func poll(t *testing.T, w *Watcher) {
	t.Helper()
	if err := w.Poll(context.Background()); err != nil {
		t.Fatal(err)
	}
	// The background reads a change starts would otherwise race the
	// source's next value.
	w.mu.Lock()
	caches := w.caches
	w.mu.Unlock()
	for _, c := range caches {
		if c, ok := c.(interface{ waitRefetches() }); ok {
			c.waitRefetches()
		}
	}
}

func (c *Cache[V]) waitRefetches() { c.refetching.Wait() }

// In sync, entries serve from memory however old; a change of their
// organization (and only of theirs) drops them.
func TestInvalidatedByTheirOrganizationsChanges(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		f, src := &changeLog{}, newSource()
		w := &Watcher{Feed: f}
		c := NewCache[string](w, "test")
		poll(t, w)
		src.set("a", "a1", "orgA")
		src.set("b", "b1", "orgB")
		mustGet(t, c, src, "a", "a1")
		mustGet(t, c, src, "b", "b1")
		mustGet(t, c, src, "nobody", "")
		calls := src.callCount("a")

		time.Sleep(time.Hour)
		poll(t, w)
		mustGet(t, c, src, "a", "a1")
		if src.callCount("a") != calls {
			t.Fatal("an in-sync entry was fetched again")
		}

		src.set("a", "a2", "orgA")
		f.change("orgA", "user", "a")
		poll(t, w)
		mustGet(t, c, src, "a", "a2")
		mustGet(t, c, src, "b", "b1")
		if got := src.callCount("b"); got != 1 {
			t.Fatalf("b fetched %d times; a change of a must not drop it", got)
		}

		// Another user of orgA changing leaves a alone; a project of orgA
		// (which a's value lists) drops it, as does orgA itself.
		src.set("a", "a3", "orgA")
		f.change("orgA", "user", "someone-else")
		poll(t, w)
		mustGet(t, c, src, "a", "a2")
		f.change("orgA", "project", "p1")
		poll(t, w)
		mustGet(t, c, src, "a", "a3")
		src.set("a", "a4", "orgA")
		f.change("orgA", "org", "orgA")
		poll(t, w)
		mustGet(t, c, src, "a", "a4")
		// A negative answer is dropped at any change: a new client may be in
		// any organization.
		src.set("nobody", "now-known", "orgC")
		f.change("orgC", "user", "nobody")
		poll(t, w)
		mustGet(t, c, src, "nobody", "now-known")

		// An instance-wide change drops everything.
		src.set("b", "b2", "orgB")
		f.change("", "instance", "instance")
		poll(t, w)
		mustGet(t, c, src, "b", "b2")
	})
}

// Through an outage entries serve until MaxStale after they were fetched,
// and a change acknowledged before the outage is never served stale.
func TestServesStaleThroughOutageOnlyBounded(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		f, src := &changeLog{}, newSource()
		w := &Watcher{Feed: f, MaxStale: 10 * time.Minute}
		c := NewCache[string](w, "test")
		poll(t, w)
		src.set("a", "a1", "orgA")
		src.set("gone", "g1", "orgG")
		mustGet(t, c, src, "a", "a1")
		mustGet(t, c, src, "gone", "g1")

		// "gone" is removed; the change is seen, then the directory goes down.
		delete(src.vals, "gone")
		f.change("orgG", "user", "gone")
		poll(t, w)
		f.setDown(true)
		src.setDown(true)

		time.Sleep(5 * time.Minute)
		if err := w.Poll(context.Background()); err == nil {
			t.Fatal("poll of a down feed succeeded")
		}
		if w.InSync() {
			t.Fatal("in sync with a down feed")
		}
		mustGet(t, c, src, "a", "a1")
		// Known to be gone (read again after the change) or unavailable,
		// never the stale value.
		if v, err := c.Get(context.Background(), "gone", src.fetch("gone")); v != "" || (err != nil && !Unavailable(err)) {
			t.Fatalf("removed entry during the outage: %q, %v; want unknown or unavailable", v, err)
		}
		time.Sleep(6 * time.Minute)
		if v, err := c.Get(context.Background(), "a", src.fetch("a")); !Unavailable(err) {
			t.Fatalf("past MaxStale: %q, %v; want unavailable", v, err)
		}

		// Back up: fresh again.
		f.setDown(false)
		src.setDown(false)
		src.set("a", "a3", "orgA")
		f.change("orgA", "user", "a")
		poll(t, w)
		mustGet(t, c, src, "a", "a3")
	})
}

// Without a feed (an older directory) entries live for TTL only.
func TestWithoutFeedEntriesLiveForTTL(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		src := newSource()
		w := &Watcher{TTL: 10 * time.Second}
		c := NewCache[string](w, "test")
		src.set("a", "a1", "orgA")
		mustGet(t, c, src, "a", "a1")
		src.set("a", "a2", "orgA")
		time.Sleep(5 * time.Second)
		mustGet(t, c, src, "a", "a1")
		time.Sleep(6 * time.Second)
		mustGet(t, c, src, "a", "a2")
	})
}

// A fetch that overlaps an invalidation is not kept: it may predate the
// change.
func TestFetchOverlappingAChangeIsNotKept(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		f, src := &changeLog{}, newSource()
		w := &Watcher{Feed: f}
		c := NewCache[string](w, "test")
		poll(t, w)
		src.set("a", "old", "orgA")
		racing := func(context.Context) (string, []Dep, error) {
			// The directory answered with the old value; the change lands
			// before the answer is stored.
			src.set("a", "new", "orgA")
			f.change("orgA", "user", "a")
			poll(t, w)
			return "old", []Dep{Object("a")}, nil
		}
		if v, err := c.Get(context.Background(), "a", racing); err != nil || v != "old" {
			t.Fatalf("racing Get = %q, %v", v, err)
		}
		mustGet(t, c, src, "a", "new")
	})
}

// A fetch that overlaps changes of other objects keeps its value: under a
// steady stream of unrelated writes (users created and changed all the
// time) a client must stay cached, or a directory outage that begins then
// finds nothing to serve. Overlapping more changes than are remembered, or
// an instance-wide one, it is not kept.
func TestFetchOverlappingUnrelatedChangesIsKept(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		overlapping := func(t *testing.T, f *changeLog, w *Watcher, changes int, all bool) Fetch[string] {
			return func(context.Context) (string, []Dep, error) {
				for i := range changes {
					f.change("orgA", "user", fmt.Sprintf("u%d", i))
					poll(t, w)
				}
				if all {
					f.change("", "instance", "i")
					poll(t, w)
				}
				return "v", []Dep{Object("a"), AnyOf("orgA", "project")}, nil
			}
		}
		for _, tc := range []struct {
			key     string
			changes int
			all     bool
			kept    bool
		}{
			{"few", 3, false, true},
			{"many", maxRecent + 1, false, false},
			{"instance", 1, true, false},
		} {
			// A cache each: an entry kept by one case would be read again in
			// the background after another's instance-wide change.
			f := &changeLog{}
			w := &Watcher{Feed: f}
			c := NewCache[string](w, "test")
			poll(t, w)
			if v, err := c.Get(context.Background(), tc.key, overlapping(t, f, w, tc.changes, tc.all)); err != nil || v != "v" {
				t.Fatalf("%s: Get = %q, %v", tc.key, v, err)
			}
			_, kept := c.m.GetIfPresent(tc.key)
			if kept != tc.kept {
				t.Fatalf("%s: kept %v; want %v", tc.key, kept, tc.kept)
			}
		}
	})
}

// An app's client lists its organization's active projects as the
// audiences it may ask for, so a change of any project of the organization
// drops it; a change elsewhere does not. A fresh context reads past memory.
func TestClientDepsAndFresh(t *testing.T) {
	f := &changeLog{}
	w := &Watcher{Feed: f}
	c := NewCache[*directoryv1.Client](w, "test")
	poll(t, w)
	reads := 0
	projects := []string{"p1", "p2"}
	fetch := func(context.Context) (*directoryv1.Client, []Dep, error) {
		reads++
		cl := &directoryv1.Client{ClientId: "web", Kind: directoryv1.ClientKind_CLIENT_KIND_OIDC_APP, ProjectId: "p1", OrgId: "org1",
			OrgProjectIds: append([]string(nil), projects...)}
		return cl, ClientDeps(cl), nil
	}
	get := func(ctx context.Context) *directoryv1.Client {
		t.Helper()
		cl, err := c.Get(ctx, "web", fetch)
		if err != nil {
			t.Fatal(err)
		}
		return cl
	}
	get(context.Background())
	get(context.Background())
	if reads != 1 {
		t.Fatalf("%d reads; want 1", reads)
	}
	f.change("org2", "project", "x") // another organization's project
	poll(t, w)
	get(context.Background())
	if reads != 1 {
		t.Fatal("a project of another organization dropped the client")
	}
	projects = []string{"p1"} // p2 deactivated
	f.change("org1", "project", "p2")
	poll(t, w)
	if got := get(context.Background()).GetOrgProjectIds(); len(got) != 1 {
		t.Fatalf("after another project of its organization was deactivated the client lists %v", got)
	}
	n := reads
	get(Fresh(context.Background()))
	if reads != n+1 || !IsFresh(Fresh(context.Background())) || IsFresh(context.Background()) {
		t.Fatal("a Fresh context was served from memory")
	}
}

// A directory just found unavailable (refused, or hung past the call's
// deadline) is not asked again for unavailableMemo: a request reading
// several entries waits for it once at most, and the entries serve stale
// within MaxStale as if each read had failed.
func TestJustUnavailableDirectoryIsNotAskedAgain(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		f, src := &changeLog{}, newSource()
		w := &Watcher{Feed: f, MaxStale: 10 * time.Minute}
		c := NewCache[string](w, "test")
		poll(t, w)
		src.set("a", "a1", "orgA")
		src.set("b", "b1", "orgB")
		mustGet(t, c, src, "a", "a1")
		mustGet(t, c, src, "b", "b1")
		f.setDown(true)
		src.setDown(true)
		time.Sleep(time.Minute) // the feed is behind, past TTL
		mustGet(t, c, src, "a", "a1")
		if n := src.callCount("a"); n != 2 {
			t.Fatalf("a read %d times; want a second read, which found the directory unavailable", n)
		}
		mustGet(t, c, src, "b", "b1")
		if n := src.callCount("b"); n != 1 {
			t.Fatalf("b read %d times right after the directory was found unavailable; want no new read", n)
		}
		time.Sleep(unavailableMemo)
		mustGet(t, c, src, "b", "b1")
		if n := src.callCount("b"); n != 2 {
			t.Fatalf("b read %d times once the memo passed; want it asked again", n)
		}
		// An entry never read is not invented.
		if _, err := c.Get(context.Background(), "new", src.fetch("new")); !Unavailable(err) {
			t.Fatalf("unknown entry while unavailable: %v; want unavailable", err)
		}
	})
}

// A machine user's client depends on the user's credentials, not on its
// metadata: a metadata entry written just before an outage leaves the
// client cached through it, while any other change of the user (a new
// secret, a deactivation; or a change without a type, from an older
// directory) drops it, and the user's claims drop at either.
func TestMachineClientKeptAcrossMetadataChanges(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		f := &changeLog{}
		w := &Watcher{Feed: f}
		clients := NewCache[*directoryv1.Client](w, "clients")
		claims := NewCache[string](w, "claims")
		poll(t, w)
		var clientReads, claimReads int
		down := false
		unavailable := connect.NewError(connect.CodeUnavailable, errors.New("down"))
		fetchClient := func(context.Context) (*directoryv1.Client, []Dep, error) {
			if down {
				return nil, nil, unavailable
			}
			clientReads++
			cl := &directoryv1.Client{ClientId: "m1", Id: "m1", Kind: directoryv1.ClientKind_CLIENT_KIND_MACHINE_USER, OrgId: "org1"}
			return cl, ClientDeps(cl), nil
		}
		fetchClaims := func(context.Context) (string, []Dep, error) {
			if down {
				return "", nil, unavailable
			}
			claimReads++
			return "claims", []Dep{Object("m1"), Object("org1")}, nil
		}
		get := func() {
			t.Helper()
			if _, err := clients.Get(context.Background(), "m1", fetchClient); err != nil {
				t.Fatalf("client: %v", err)
			}
			if _, err := claims.Get(context.Background(), "m1", fetchClaims); err != nil {
				t.Fatalf("claims: %v", err)
			}
		}
		typed := func(typ string) {
			f.mu.Lock()
			f.changes = append(f.changes, &directoryv1.Change{Sequence: uint64(len(f.changes) + 1), OrgId: "org1",
				AggregateType: "user", AggregateId: "m1", EventType: typ})
			f.mu.Unlock()
		}
		get()
		for _, typ := range CredentialNeutral {
			typed(typ)
		}
		poll(t, w)
		get()
		if clientReads != 1 || claimReads != 2 {
			t.Fatalf("after metadata changes: %d client reads (want 1), %d claims reads (want 2)", clientReads, claimReads)
		}
		// The directory goes down right after the poll that read a
		// metadata change, before anything is read again: the client
		// still serves.
		typed("user.metadata.set")
		down = true
		poll(t, w)
		f.setDown(true)
		time.Sleep(time.Minute)
		if _, err := clients.Get(context.Background(), "m1", fetchClient); err != nil {
			t.Fatalf("through the outage after a metadata change: %v", err)
		}
		down = false
		f.setDown(false)
		poll(t, w)
		for i, typ := range []string{"user.machine.secret.set", "user.deactivated", ""} {
			typed(typ)
			poll(t, w)
			get()
			if clientReads != 2+i {
				t.Fatalf("after a %q change: %d client reads; want %d (dropped and read again)", typ, clientReads, 2+i)
			}
		}
	})
}
