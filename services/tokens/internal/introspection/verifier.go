package introspection

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/gatehouse-id/gatehouse/pkg/secrets"
	"github.com/gatehouse-id/gatehouse/services/tokens/accesstoken"
	"github.com/gatehouse-id/gatehouse/services/tokens/internal/kind"
	"github.com/gatehouse-id/gatehouse/services/tokens/internal/store"
)

// Keys is the published key set (keys.Manager).
type Keys interface {
	Verify(token string) ([]byte, error)
}

// NewVerifier returns the tokens service's own access token verifier: JWTs
// against the keys it publishes, opaque tokens by their keyed hash in the
// store, and the revocation list.
func NewVerifier(issuer string, keys Keys, st *store.Store, hasher *secrets.Hasher, revoked accesstoken.Revocations, now func() time.Time) *accesstoken.Verifier {
	return &accesstoken.Verifier{
		Issuer:  issuer,
		Keys:    accesstoken.KeysFunc(func(_ context.Context, token string) ([]byte, error) { return keys.Verify(token) }),
		Opaque:  storeLookup{store: st, hasher: hasher},
		Revoked: revoked,
		Now:     now,
	}
}

// storeLookup finds opaque access tokens by their keyed hash.
type storeLookup struct {
	store  *store.Store
	hasher *secrets.Hasher
}

func (l storeLookup) Lookup(ctx context.Context, raw string) (*accesstoken.Token, error) {
	if raw == "" || len(raw) > 100 || kind.Other(raw, kind.AccessToken) {
		return nil, accesstoken.ErrInactive
	}
	a, err := l.store.AccessTokenByHash(ctx, l.hasher.TokenKey(raw))
	if errors.Is(err, store.ErrNotFound) {
		return nil, accesstoken.ErrInactive
	}
	if err != nil {
		return nil, errors.Join(accesstoken.ErrUnavailable, err)
	}
	t := &accesstoken.Token{ID: a.ID, ClientID: a.ClientID, Subject: a.Subject, OrgID: a.OrgID, Scopes: a.Scopes(),
		Audience: a.Audience(), IssuedAt: a.CreatedAt, NotBefore: a.CreatedAt, ExpiresAt: a.ExpiresAt, AMR: a.AMR()}
	if a.JKT != nil {
		t.JKT = *a.JKT
	}
	if a.Act != nil {
		t.Act = json.RawMessage(*a.Act)
	}
	return t, nil
}
