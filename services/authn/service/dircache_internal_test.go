package service

import (
	"context"
	"sync"
	"testing"

	"connectrpc.com/connect"

	"github.com/gatehouse-id/gatehouse/pkg/dircache"
	directoryv1 "github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/directory/v1"
	"github.com/gatehouse-id/gatehouse/services/authn/internal/authntest"
)

// countingDirectory is the fake directory with a change feed, counting
// the reads that reach it.
type countingDirectory struct {
	*authntest.Directory
	mu      sync.Mutex
	calls   map[string]int
	changes []*directoryv1.Change
}

func (d *countingDirectory) count(m string) {
	d.mu.Lock()
	d.calls[m]++
	d.mu.Unlock()
}

func (d *countingDirectory) n(m string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.calls[m]
}

func (d *countingDirectory) GetClient(ctx context.Context, r *directoryv1.GetClientRequest) (*directoryv1.GetClientResponse, error) {
	// Under mu: the test replaces clients while the cache reads some
	// again in the background.
	d.mu.Lock()
	defer d.mu.Unlock()
	d.calls["GetClient"]++
	d.calls["GetClient "+r.GetClientId()]++
	return d.Directory.GetClient(ctx, r)
}

func (d *countingDirectory) setClient(c *directoryv1.Client) {
	d.mu.Lock()
	d.Clients[c.GetClientId()] = c
	d.mu.Unlock()
}

func (d *countingDirectory) GetOrg(ctx context.Context, r *directoryv1.GetOrgRequest) (*directoryv1.GetOrgResponse, error) {
	d.count("GetOrg")
	return d.Directory.GetOrg(ctx, r)
}

func (d *countingDirectory) ListChanges(_ context.Context, r *directoryv1.ListChangesRequest) (*directoryv1.ListChangesResponse, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := &directoryv1.ListChangesResponse{Cursor: uint64(len(d.changes))}
	for _, c := range d.changes {
		if c.GetSequence() > r.GetAfterSequence() {
			out.Changes = append(out.Changes, c)
		}
	}
	return out, nil
}

func (d *countingDirectory) change(org, typ, id string) {
	d.mu.Lock()
	d.changes = append(d.changes, &directoryv1.Change{Sequence: uint64(len(d.changes) + 1), OrgId: org, AggregateType: typ, AggregateId: id})
	d.mu.Unlock()
}

// A sign-in's repeated reads come from memory until the directory's feed
// reports a change of what they are made of; then the next read is fresh.
func TestCachedDirectory(t *testing.T) {
	ctx := context.Background()
	dir := &countingDirectory{Directory: authntest.NewDirectory(), calls: map[string]int{}}
	dir.Clients["web"] = &directoryv1.Client{ClientId: "web", ProjectId: "p1", OrgId: "org1", Active: true, RedirectUris: []string{"https://a.example/cb"}}
	dir.Orgs["org1"] = &directoryv1.GetOrgResponse{Id: "org1", Active: true}
	w := &dircache.Watcher{Feed: dir}
	if err := w.Poll(ctx); err != nil {
		t.Fatal(err)
	}
	c := newCachedDirectory(dir, w)
	getClient := func(id string) (*directoryv1.Client, error) {
		res, err := c.GetClient(ctx, &directoryv1.GetClientRequest{ClientId: id})
		if err != nil {
			return nil, err
		}
		return res.GetClient(), nil
	}
	for range 3 {
		if cl, err := getClient("web"); err != nil || cl.GetRedirectUris()[0] != "https://a.example/cb" {
			t.Fatalf("GetClient = %v %v", cl, err)
		}
		if _, err := getClient("nobody"); connect.CodeOf(err) != connect.CodeNotFound {
			t.Fatalf("GetClient(unknown) = %v; want NotFound", err)
		}
		if _, err := c.GetOrg(ctx, &directoryv1.GetOrgRequest{OrgId: "org1"}); err != nil {
			t.Fatal(err)
		}
	}
	if dir.n("GetClient") != 2 || dir.n("GetOrg") != 3 {
		t.Fatalf("reads reaching the directory: %v; want one per client, and every organization read (its login policy applies at once)", dir.calls)
	}

	// The app's redirect URI changes (an event of its project): the next
	// /authorize sees it.
	dir.setClient(&directoryv1.Client{ClientId: "web", ProjectId: "p1", OrgId: "org1", Active: true, RedirectUris: []string{"https://b.example/cb"}})
	dir.change("org1", "project", "p1")
	if err := w.Poll(ctx); err != nil {
		t.Fatal(err)
	}
	if cl, err := getClient("web"); err != nil || cl.GetRedirectUris()[0] != "https://b.example/cb" {
		t.Fatalf("GetClient after its project changed = %v %v; want the new redirect URI", cl, err)
	}
	// Another project of the organization is deactivated: the client lists
	// its organization's active projects as audiences, so it is read again.
	n := dir.n("GetClient")
	dir.change("org1", "project", "p2")
	if err := w.Poll(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := getClient("web"); err != nil || dir.n("GetClient") <= n {
		t.Fatalf("GetClient after another project of its organization changed was served from memory (%v)", err)
	}
	// A request that names a reserved scope reads the client fresh. (A
	// client no change has touched, so no background read interferes.)
	dir.setClient(&directoryv1.Client{ClientId: "solo", ProjectId: "p4", OrgId: "org3", Active: true})
	for range 2 {
		if _, err := getClient("solo"); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.GetClient(dircache.Fresh(ctx), &directoryv1.GetClientRequest{ClientId: "solo"}); err != nil || dir.n("GetClient solo") != 2 {
		t.Fatalf("GetClient under dircache.Fresh: %v, %d reads in all; want one from memory, then one fresh", err, dir.n("GetClient solo"))
	}
	// A client whose project is granted to another organization is read
	// fresh every time: a removed grant ends at once.
	dir.setClient(&directoryv1.Client{ClientId: "partnered", ProjectId: "p3", OrgId: "org1", Active: true, GrantedOrgIds: []string{"org2"}})
	for range 2 {
		if _, err := getClient("partnered"); err != nil {
			t.Fatal(err)
		}
	}
	if got := dir.n("GetClient partnered"); got != 2 {
		t.Fatalf("two lookups of a client with grants read the directory %d times; want once each", got)
	}
	dir.setClient(&directoryv1.Client{ClientId: "partnered", ProjectId: "p3", OrgId: "org1", Active: true})
	if cl, err := getClient("partnered"); err != nil || len(cl.GetGrantedOrgIds()) != 0 {
		t.Fatalf("GetClient of a client whose grant was just removed = %v %v; want no grant", cl, err)
	}
}
