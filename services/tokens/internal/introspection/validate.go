package introspection

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/gatehouse-id/gatehouse/pkg/secrets"
	"github.com/gatehouse-id/gatehouse/services/tokens/internal/store"
)

// ErrInactive: the token is unknown, malformed, expired, not yet valid,
// revoked or not ours. Callers answer active:false, never why.
var ErrInactive = errors.New("token inactive")

// JWS verifies a compact JWS against the published keys and returns its
// payload (keys.Manager.Verify).
type JWS interface {
	Verify(token string) ([]byte, error)
}

// Revocations is the revocation list (revocation.List).
type Revocations interface {
	// TokenRevoked reports whether the token is revoked, by its id or by
	// a cut-off of its user (a deactivation, removal or admin password
	// reset) covering its expiry.
	TokenRevoked(ctx context.Context, tokenID, subject string, expiresAt time.Time) (bool, error)
}

// Validator validates access tokens.
type Validator struct {
	Issuer  string
	Keys    JWS
	Store   *store.Store
	Hasher  *secrets.Hasher
	Revoked Revocations
	Now     func() time.Time

	verified verifiedCache
}

// Token is a valid access token. Validate may return the same *Token for
// the same token text: callers must not modify it.
type Token struct {
	ID        string
	ClientID  string
	Subject   string
	OrgID     string
	Scopes    []string
	Audience  []string
	IssuedAt  time.Time
	NotBefore time.Time
	ExpiresAt time.Time
}

type jwtClaims struct {
	Issuer    string   `json:"iss"`
	Subject   string   `json:"sub"`
	Audience  audience `json:"aud"`
	Expiry    int64    `json:"exp"`
	IssuedAt  int64    `json:"iat"`
	NotBefore int64    `json:"nbf"`
	JTI       string   `json:"jti"`
	ClientID  string   `json:"client_id"`
	Scope     string   `json:"scope"`
}

// audience accepts a string or an array (RFC 7519 §4.1.3).
type audience []string

func (a *audience) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		*a = []string{s}
		return nil
	}
	return json.Unmarshal(b, (*[]string)(a))
}

// Validate returns the token's data, or ErrInactive.
func (v *Validator) Validate(ctx context.Context, raw string) (*Token, error) {
	now := v.Now()
	var t *Token
	var err error
	if t = v.verified.get(raw); t == nil {
		if strings.Count(raw, ".") == 2 {
			t, err = v.jwt(raw)
		} else {
			t, err = v.opaque(ctx, raw)
		}
		if err == nil && now.Before(t.ExpiresAt) {
			v.verified.put(raw, t, now)
		}
	}
	if err != nil {
		return nil, err
	}
	if !now.Before(t.ExpiresAt) || now.Before(t.NotBefore.Add(-time.Minute)) {
		return nil, ErrInactive
	}
	// A deactivated, locked or removed user, or an admin password reset,
	// revokes every token of the user issued up to then.
	revoked, err := v.Revoked.TokenRevoked(ctx, t.ID, t.Subject, t.ExpiresAt)
	if err != nil {
		return nil, fmt.Errorf("revocation check: %w", err)
	}
	if revoked {
		return nil, ErrInactive
	}
	return t, nil
}

func (v *Validator) opaque(ctx context.Context, raw string) (*Token, error) {
	if raw == "" || len(raw) > 100 {
		return nil, ErrInactive
	}
	a, err := v.Store.AccessTokenByHash(ctx, v.Hasher.TokenKey(raw))
	if errors.Is(err, store.ErrNotFound) {
		return nil, ErrInactive
	}
	if err != nil {
		return nil, err
	}
	return &Token{ID: a.ID, ClientID: a.ClientID, Subject: a.Subject, OrgID: a.OrgID, Scopes: a.Scopes(),
		Audience: a.Audience(), IssuedAt: a.CreatedAt, NotBefore: a.CreatedAt, ExpiresAt: a.ExpiresAt}, nil
}

func (v *Validator) jwt(raw string) (*Token, error) {
	payload, err := v.Keys.Verify(raw)
	if err != nil {
		return nil, ErrInactive
	}
	var c jwtClaims
	// An access token has jti and client_id; an ID token (also signed by
	// us) has neither and must never pass as one.
	if json.Unmarshal(payload, &c) != nil || c.Issuer != v.Issuer || c.JTI == "" || c.ClientID == "" {
		return nil, ErrInactive
	}
	return &Token{ID: c.JTI, ClientID: c.ClientID, Subject: c.Subject, Scopes: strings.Fields(c.Scope), Audience: c.Audience,
		IssuedAt: time.Unix(c.IssuedAt, 0), NotBefore: time.Unix(c.NotBefore, 0), ExpiresAt: time.Unix(c.Expiry, 0)}, nil
}
