// Package clients finds OAuth clients in the directory, caches them briefly
// (the token endpoint must not make a round trip per request), and
// authenticates them by exactly one of client_secret_basic,
// client_secret_post, none and private_key_jwt (RFC 6749 §2.3, OIDC Core §9).
// A failed secret check refetches the client once, so a regenerated secret
// works at once; a removed secret stops working within the cache TTL.
package clients

import (
	"context"
	"errors"
	"sync"
	"time"

	"connectrpc.com/connect"

	directoryv1 "github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/directory/v1"
)

// Directory is the part of the directory's internal API this package needs.
type Directory interface {
	GetClient(context.Context, *connect.Request[directoryv1.GetClientRequest]) (*connect.Response[directoryv1.GetClientResponse], error)
}

// ErrUnknown is returned for a client_id the directory does not know.
var ErrUnknown = errors.New("unknown client")

// Cache looks clients up through the directory, keeping each for TTL.
type Cache struct {
	Dir Directory
	TTL time.Duration
	Now func() time.Time

	mu      sync.Mutex
	entries map[string]entry
}

type entry struct {
	c       *directoryv1.Client
	fetched time.Time
}

const maxEntries = 10000

// Get returns a client, from the cache when fresh.
func (c *Cache) Get(ctx context.Context, clientID string) (*directoryv1.Client, error) {
	now := c.now()
	c.mu.Lock()
	e, ok := c.entries[clientID]
	c.mu.Unlock()
	if ok && now.Sub(e.fetched) < c.TTL {
		if e.c == nil {
			return nil, ErrUnknown
		}
		return e.c, nil
	}
	return c.Refresh(ctx, clientID)
}

// Refresh fetches a client from the directory, bypassing the cache.
func (c *Cache) Refresh(ctx context.Context, clientID string) (*directoryv1.Client, error) {
	res, err := c.Dir.GetClient(ctx, connect.NewRequest(&directoryv1.GetClientRequest{ClientId: clientID}))
	var cl *directoryv1.Client
	switch {
	case connect.CodeOf(err) == connect.CodeNotFound:
		// Cached too, so unknown ids cannot hammer the directory.
	case err != nil:
		return nil, err
	default:
		cl = res.Msg.GetClient()
	}
	c.mu.Lock()
	if c.entries == nil || len(c.entries) >= maxEntries {
		c.entries = map[string]entry{}
	}
	c.entries[clientID] = entry{c: cl, fetched: c.now()}
	c.mu.Unlock()
	if cl == nil {
		return nil, ErrUnknown
	}
	return cl, nil
}

func (c *Cache) now() time.Time {
	if c.Now != nil {
		return c.Now()
	}
	return time.Now()
}
