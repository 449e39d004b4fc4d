// Package clients finds OAuth clients in the directory, caches them (the
// token endpoint must not make a round trip per request; package dircache
// drops an entry when its organization changes and keeps it through a
// directory outage for a bounded time), and authenticates them by exactly
// one of client_secret_basic, client_secret_post, none and private_key_jwt
// (RFC 6749 §2.3, OIDC Core §9). A failed secret check refetches the
// client once, so a regenerated secret works at once.
package clients

import (
	"context"
	"errors"
	"slices"
	"strings"

	"connectrpc.com/connect"

	"github.com/gatehouse-id/gatehouse/pkg/dircache"
	directoryv1 "github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/directory/v1"
)

// Directory is the part of the directory's internal API this package needs.
type Directory interface {
	GetClient(context.Context, *directoryv1.GetClientRequest) (*directoryv1.GetClientResponse, error)
}

// ErrUnknown is returned for a client_id the directory does not know.
var ErrUnknown = errors.New("unknown client")

// Cache looks clients up through the directory.
type Cache struct {
	dir Directory
	c   *dircache.Cache[*directoryv1.Client]
}

// NewCache returns a cache over dir that w invalidates.
func NewCache(dir Directory, w *dircache.Watcher) *Cache {
	return &Cache{dir: dir, c: dircache.NewCache[*directoryv1.Client](w, "tokens_clients")}
}

// Get returns a client, from the cache when it can be trusted.
func (c *Cache) Get(ctx context.Context, clientID string) (*directoryv1.Client, error) {
	return found(c.c.Get(ctx, clientID, c.fetch(clientID)))
}

// Refresh fetches a client from the directory, bypassing the cache.
func (c *Cache) Refresh(ctx context.Context, clientID string) (*directoryv1.Client, error) {
	return found(c.c.Refresh(ctx, clientID, c.fetch(clientID)))
}

func found(cl *directoryv1.Client, err error) (*directoryv1.Client, error) {
	if err == nil && cl == nil {
		return nil, ErrUnknown
	}
	return cl, err
}

// fetch reads a client; an unknown one is cached too (as nil, dropped at
// any change), so unknown ids cannot hammer the directory.
func (c *Cache) fetch(clientID string) dircache.Fetch[*directoryv1.Client] {
	return func(ctx context.Context) (*directoryv1.Client, []dircache.Dep, error) {
		res, err := c.dir.GetClient(ctx, &directoryv1.GetClientRequest{ClientId: clientID})
		if connect.CodeOf(err) == connect.CodeNotFound {
			return nil, nil, nil
		}
		if err != nil {
			return nil, nil, err
		}
		cl := res.GetClient()
		return cl, dircache.ClientDeps(cl), nil
	}
}

// KeyCache caches machine users' public keys as Cache does clients; it is
// a MachineKeys itself.
type KeyCache struct {
	dir MachineKeys
	c   *dircache.Cache[*directoryv1.GetMachineKeyResponse]
}

// NewKeyCache returns a cache over dir that w invalidates.
func NewKeyCache(dir MachineKeys, w *dircache.Watcher) *KeyCache {
	return &KeyCache{dir: dir, c: dircache.NewCache[*directoryv1.GetMachineKeyResponse](w, "tokens_machine_keys")}
}

var errUnknownKey = connect.NewError(connect.CodeNotFound, errors.New("unknown key"))

// GetMachineKey implements MachineKeys: NotFound for an unknown key.
func (m *KeyCache) GetMachineKey(ctx context.Context, req *directoryv1.GetMachineKeyRequest) (*directoryv1.GetMachineKeyResponse, error) {
	kid := req.GetKeyId()
	res, err := m.c.Get(ctx, kid, func(ctx context.Context) (*directoryv1.GetMachineKeyResponse, []dircache.Dep, error) {
		res, err := m.dir.GetMachineKey(ctx, &directoryv1.GetMachineKeyRequest{KeyId: kid})
		if connect.CodeOf(err) == connect.CodeNotFound {
			return nil, nil, nil
		}
		if err != nil {
			return nil, nil, err
		}
		u := res.GetUser()
		return res, dircache.MachineDeps(u.GetId(), u.GetOrgId()), nil
	})
	if err != nil {
		return nil, err
	}
	if res == nil {
		return nil, errUnknownKey
	}
	return res, nil
}

// ClaimsDirectory is the directory's claims lookup.
type ClaimsDirectory interface {
	GetClaims(context.Context, *directoryv1.GetClaimsRequest) (*directoryv1.GetClaimsResponse, error)
}

// ClaimsCache keeps users' claims for introspection and userinfo, so
// neither calls the directory per request. A change of the user or its
// organization drops the entry within a poll of the change feed; the
// changes that must cut access at once (deactivation, removal, an admin's
// password reset) also reach the revocation list before the directory
// acknowledges them, and the revocation check comes before the claims. Through a
// directory outage entries serve for at most MaxStale (dircache.Get).
type ClaimsCache struct {
	dir ClaimsDirectory
	c   *dircache.Cache[*directoryv1.GetClaimsResponse]
}

// NewClaimsCache returns a cache over dir that w invalidates.
func NewClaimsCache(dir ClaimsDirectory, w *dircache.Watcher) *ClaimsCache {
	return &ClaimsCache{dir: dir, c: dircache.NewCache[*directoryv1.GetClaimsResponse](w, "tokens_claims")}
}

// GetClaims implements ClaimsDirectory.
func (c *ClaimsCache) GetClaims(ctx context.Context, req *directoryv1.GetClaimsRequest) (*directoryv1.GetClaimsResponse, error) {
	scopes := slices.Clone(req.GetScopes())
	slices.Sort(scopes)
	key := req.GetUserId() + "\x00" + strings.Join(scopes, " ")
	res, err := c.c.Get(ctx, key, func(ctx context.Context) (*directoryv1.GetClaimsResponse, []dircache.Dep, error) {
		res, err := c.dir.GetClaims(ctx, req)
		if err != nil {
			return nil, nil, err
		}
		return res, []dircache.Dep{dircache.Object(req.GetUserId()), dircache.Object(res.GetOrgId())}, nil
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}
