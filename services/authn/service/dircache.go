package service

import (
	"context"
	"errors"

	"connectrpc.com/connect"

	"github.com/gatehouse-id/gatehouse/pkg/dircache"
	directoryv1 "github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/directory/v1"
)

// cachedDirectory answers /authorize's client lookup, which every
// sign-in and every silent (prompt=none) renewal makes, from memory that
// the directory's change feed invalidates: a change reaches authn within
// one poll of the feed, as it reaches tokens. Everything else goes to the
// directory, organizations and their login policies included, so a policy
// an admin changes applies to the very next page.
type cachedDirectory struct {
	Directory
	clients *dircache.Cache[*directoryv1.Client]
}

func newCachedDirectory(dir Directory, w *dircache.Watcher) *cachedDirectory {
	return &cachedDirectory{Directory: dir, clients: dircache.NewCache[*directoryv1.Client](w, "authn_clients")}
}

// errNotFound is what an unknown id cached as nil answers: the directory's
// code, which is all callers look at.
func errNotFound(what string) error {
	return connect.NewError(connect.CodeNotFound, errors.New(what+" not found"))
}

// GetClient implements Directory. An unknown client id is cached too
// (dropped at any change), so unknown ids cannot hammer the directory. A
// client whose project is granted to other organizations, or an admin
// client, is read fresh every time: removing a grant or the admin mark
// takes effect at once (as in tokens); so is a request marked
// dircache.Fresh (one that names an organization or the management API).
func (d *cachedDirectory) GetClient(ctx context.Context, req *directoryv1.GetClientRequest) (*directoryv1.GetClientResponse, error) {
	id := req.GetClientId()
	fetch := func(ctx context.Context) (*directoryv1.Client, []dircache.Dep, error) {
		res, err := d.Directory.GetClient(ctx, &directoryv1.GetClientRequest{ClientId: id})
		if connect.CodeOf(err) == connect.CodeNotFound {
			return nil, nil, nil
		}
		if err != nil {
			return nil, nil, err
		}
		return res.GetClient(), dircache.ClientDeps(res.GetClient()), nil
	}
	c, err := d.clients.GetUnless(ctx, id, fetch, func(c *directoryv1.Client) bool {
		return len(c.GetGrantedOrgIds()) > 0 || c.GetAdminClient()
	})
	if err != nil {
		return nil, err
	}
	if c == nil {
		return nil, errNotFound("client")
	}
	return &directoryv1.GetClientResponse{Client: c}, nil
}
