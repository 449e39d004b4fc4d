package introspection

import (
	"sync"
	"time"
)

// maxVerified bounds the verified-token cache (a few MB of tokens).
const maxVerified = 4096

// verifiedCache remembers the claims of access tokens that checked out,
// keyed by the exact token text: JWTs whose signature and form are valid,
// and opaque tokens found in the store. A resource server introspects the
// same token on every call it receives; verifying the signature and
// parsing the claims again was a third of each JWT introspection, and the
// store's lookup of an opaque token a database round trip. What the cache
// holds is a pure function of the token and the published keys (a key
// stays published until every token it signed has expired) or of the
// token's row, which is never changed and deleted only after its expiry
// (revocation is a separate list), so it never answers differently from a
// fresh check; expiry, revocation and the user's state are still checked on
// every call. An unknown token is never remembered. Entries
// leave when their token expires; when the cache is full it is emptied,
// which bounds memory without bookkeeping per hit.
type verifiedCache struct {
	mu sync.RWMutex
	m  map[string]*Token
}

func (c *verifiedCache) get(raw string) *Token {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.m[raw]
}

func (c *verifiedCache) put(raw string, t *Token, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.m) >= maxVerified {
		// Keep what is still valid when most entries have expired;
		// otherwise start over.
		for k, v := range c.m {
			if !now.Before(v.ExpiresAt) {
				delete(c.m, k)
			}
		}
		if len(c.m) >= maxVerified/2 {
			clear(c.m)
		}
	}
	if c.m == nil {
		c.m = make(map[string]*Token)
	}
	c.m[raw] = t
}
