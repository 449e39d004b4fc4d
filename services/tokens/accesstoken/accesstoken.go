// Package accesstoken answers "is this access token good" for every party
// that receives Gatehouse access tokens: the tokens service's own
// introspection, userinfo, revocation and admin API, and resource-side code
// such as the directory's management API (see NewRemote).
//
// A Verifier checks a JWT access token's signature against the published
// key set and its claims (Claims, the one layout the tokens service mints),
// looks an opaque one up, then checks its lifetime, audience and the
// revocation list on every use. What a token says is remembered by its
// text until it expires: a resource server sees the same token on every
// call, and what is remembered is a pure function of the token and the
// published keys (or of the token's row, which never changes), so it never
// answers differently from a fresh check. Revocation is asked every time.
package accesstoken

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/maypok86/otter/v2"

	"github.com/gatehouse-id/gatehouse/pkg/cache"
)

// Errors Verify returns.
var (
	// ErrInactive: the token is unknown, malformed, expired, not yet
	// valid, revoked, not ours or not for the audience. Callers answer
	// active:false or 401, never why.
	ErrInactive = errors.New("access token inactive")
	// ErrUnavailable: something the check needs (the key set, the
	// revocation list, the token store) cannot answer. Callers answer 503,
	// never a verdict on the token.
	ErrUnavailable = errors.New("access token check unavailable")
)

// Claims is the payload of a JWT access token: what mint writes and
// Verify reads.
type Claims struct {
	Issuer    string   `json:"iss"`
	Subject   string   `json:"sub"`
	Audience  Audience `json:"aud"`
	Expiry    int64    `json:"exp"`
	IssuedAt  int64    `json:"iat"`
	NotBefore int64    `json:"nbf"`
	JTI       string   `json:"jti"`
	ClientID  string   `json:"client_id"`
	Scope     string   `json:"scope,omitempty"`
	// AMR and ACR: how the user signed in (RFC 9068 §2.2.1), absent for
	// tokens without a person's login.
	AMR []string `json:"amr,omitempty"`
	ACR string   `json:"acr,omitempty"`
	// Cnf binds a DPoP token to its key (RFC 9449 §6.1).
	Cnf *Confirmation `json:"cnf,omitempty"`
	// Act names who acts for the subject, and who for them in turn
	// (RFC 8693 §4.1): a token of a delegating token exchange.
	Act json.RawMessage `json:"act,omitempty"`
}

// Confirmation is the cnf claim of a DPoP-bound token: the SHA-256 JWK
// thumbprint of its key (RFC 7638), base64url.
type Confirmation struct {
	JKT string `json:"jkt"`
}

// Audience is a JWT audience: written as an array, read from a string or
// an array (RFC 7519 §4.1.3).
type Audience []string

// UnmarshalJSON accepts a string or an array of strings.
func (a *Audience) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		*a = Audience{s}
		return nil
	}
	return json.Unmarshal(b, (*[]string)(a))
}

// Token is what a valid access token says. Verify may return the same
// *Token for the same token text: callers must not modify it.
type Token struct {
	ID       string
	ClientID string
	Subject  string
	// OrgID is the user's organization, known for opaque tokens only.
	OrgID     string
	Scopes    []string
	Audience  []string
	IssuedAt  time.Time
	NotBefore time.Time
	ExpiresAt time.Time
	// AMR is how the user signed in (RFC 8176), when known: a JWT's amr
	// claim, an opaque token's stored login. Empty for remote checks.
	AMR []string
	// JKT is the thumbprint of the DPoP key the token is bound to; ""
	// for a bearer token. A bound token is good only with a proof of
	// that key: a resource that checks no proof must refuse it.
	JKT string
	// Act is the act claim (RFC 8693 §4.1) of a token acting for its
	// subject; nil otherwise.
	Act json.RawMessage
}

// Keys verifies a compact JWS against the published key set and returns
// its payload. An error wrapping ErrUnavailable means the key set cannot
// be read; any other error, that the token is not validly signed.
type Keys interface {
	Verify(ctx context.Context, token string) ([]byte, error)
}

// KeysFunc adapts a function to Keys.
type KeysFunc func(ctx context.Context, token string) ([]byte, error)

// Verify calls f.
func (f KeysFunc) Verify(ctx context.Context, token string) ([]byte, error) { return f(ctx, token) }

// Opaque looks an opaque access token up: ErrInactive when unknown.
type Opaque interface {
	Lookup(ctx context.Context, raw string) (*Token, error)
}

// Revocations is the revocation list.
type Revocations interface {
	// TokenRevoked reports whether the token is revoked, by its id or by
	// a cut-off of its user (a deactivation, removal or admin password
	// reset) covering its expiry.
	TokenRevoked(ctx context.Context, tokenID, subject string, expiresAt time.Time) (bool, error)
}

// DefaultCacheSize bounds the tokens a Verifier remembers.
const DefaultCacheSize = 10000

// Verifier verifies access tokens.
type Verifier struct {
	// Issuer is the iss every JWT access token carries.
	Issuer string
	// Audience, when set, must be one of the token's audiences.
	Audience string
	Keys     Keys
	Opaque   Opaque
	Revoked  Revocations
	// Now is the clock (time.Now when nil).
	Now func() time.Time
	// CacheSize: DefaultCacheSize when 0.
	CacheSize int
	// CacheName names the cache in metrics ("verified_tokens" when empty).
	CacheName string

	once  sync.Once
	cache *otter.Cache[string, *Token]
}

func (v *Verifier) init() {
	v.once.Do(func() {
		size := v.CacheSize
		if size <= 0 {
			size = DefaultCacheSize
		}
		name := v.CacheName
		if name == "" {
			name = "verified_tokens"
		}
		v.cache = cache.New(cache.Options[string, *Token]{Name: name, Size: size, Now: v.Now,
			ExpiresAt: func(_ string, t *Token) time.Time { return t.ExpiresAt }})
	})
}

func (v *Verifier) now() time.Time {
	if v.Now != nil {
		return v.Now()
	}
	return time.Now()
}

// Verify returns what raw says; ErrInactive when it is not a good access
// token (for the Audience, when set); an error wrapping ErrUnavailable
// when the check cannot be made.
func (v *Verifier) Verify(ctx context.Context, raw string) (*Token, error) {
	v.init()
	now := v.now()
	t, ok := v.cache.GetIfPresent(raw)
	if !ok {
		var err error
		if strings.Count(raw, ".") == 2 {
			t, err = v.jwt(ctx, raw)
		} else {
			t, err = v.Opaque.Lookup(ctx, raw)
		}
		if err != nil {
			return nil, err
		}
		if now.Before(t.ExpiresAt) {
			v.cache.Set(raw, t)
		}
	}
	if !now.Before(t.ExpiresAt) || now.Before(t.NotBefore.Add(-time.Minute)) {
		return nil, ErrInactive
	}
	if v.Audience != "" && !slices.Contains(t.Audience, v.Audience) {
		return nil, ErrInactive
	}
	// A deactivated, locked or removed user, or an admin password reset,
	// revokes every token of the user issued up to then.
	revoked, err := v.Revoked.TokenRevoked(ctx, t.ID, t.Subject, t.ExpiresAt)
	if err != nil {
		return nil, fmt.Errorf("%w: revocation list: %w", ErrUnavailable, err)
	}
	if revoked {
		return nil, ErrInactive
	}
	// A token acting for its subject is cut with any of its actors too:
	// a deactivated actor's delegations end with it.
	for _, actor := range Actors(t.Act) {
		revoked, err := v.Revoked.TokenRevoked(ctx, "", actor, t.ExpiresAt)
		if err != nil {
			return nil, fmt.Errorf("%w: revocation list: %w", ErrUnavailable, err)
		}
		if revoked {
			return nil, ErrInactive
		}
	}
	return t, nil
}

// maxActors bounds the chain Actors reads.
const maxActors = 10

// Actors returns the subjects of an act claim's chain, current actor
// first (RFC 8693 §4.1).
func Actors(act json.RawMessage) []string {
	var out []string
	for len(act) > 0 && len(out) < maxActors {
		var a struct {
			Sub string          `json:"sub"`
			Act json.RawMessage `json:"act"`
		}
		if json.Unmarshal(act, &a) != nil || a.Sub == "" {
			break
		}
		out = append(out, a.Sub)
		act = a.Act
	}
	return out
}

func (v *Verifier) jwt(ctx context.Context, raw string) (*Token, error) {
	if !accessTokenType(raw) {
		return nil, ErrInactive
	}
	payload, err := v.Keys.Verify(ctx, raw)
	if errors.Is(err, ErrUnavailable) {
		return nil, err
	}
	if err != nil {
		return nil, ErrInactive
	}
	var c Claims
	// An access token has jti and client_id; an ID token (also signed by
	// the tokens service) has neither and must never pass as one.
	if json.Unmarshal(payload, &c) != nil || c.Issuer != v.Issuer || c.JTI == "" || c.ClientID == "" || c.Subject == "" {
		return nil, ErrInactive
	}
	t := &Token{ID: c.JTI, ClientID: c.ClientID, Subject: c.Subject, Scopes: strings.Fields(c.Scope), Audience: c.Audience, AMR: c.AMR,
		IssuedAt: time.Unix(c.IssuedAt, 0), NotBefore: time.Unix(c.NotBefore, 0), ExpiresAt: time.Unix(c.Expiry, 0), Act: c.Act}
	if c.Cnf != nil {
		if c.Cnf.JKT == "" {
			return nil, ErrInactive // a confirmation this verifier cannot hold to
		}
		t.JKT = c.Cnf.JKT
	}
	return t, nil
}

// accessTokenType reports whether the JOSE header's typ names an access
// token: at+jwt (RFC 9068 §4, also as application/at+jwt), or JWT, which
// Gatehouse wrote on access tokens before (they live at most one access
// token lifetime after an upgrade; an ID token, typ JWT too, is refused
// by its claims).
func accessTokenType(raw string) bool {
	seg, _, _ := strings.Cut(raw, ".")
	b, err := base64.RawURLEncoding.DecodeString(seg)
	if err != nil {
		return false
	}
	var h struct {
		Typ string `json:"typ"`
	}
	if json.Unmarshal(b, &h) != nil {
		return false
	}
	switch strings.ToLower(h.Typ) {
	case "at+jwt", "application/at+jwt", "jwt":
		return true
	}
	return false
}
