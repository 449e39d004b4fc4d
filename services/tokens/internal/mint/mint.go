// Package mint makes the tokens the token endpoint returns: access tokens
// (a signed JWT, or an opaque 256-bit random value after its issue time,
// stored under secrets.Hasher.TokenKey: the time, then a keyed hash),
// ID tokens, and the token response. JWT access tokens carry
// accesstoken.Claims: iss, sub, aud, exp, iat, nbf, jti, client_id and scope.
package mint

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/gatehouse-id/gatehouse/pkg/db"
	"github.com/gatehouse-id/gatehouse/pkg/oauth"
	"github.com/gatehouse-id/gatehouse/pkg/secrets"
	"github.com/gatehouse-id/gatehouse/services/tokens/accesstoken"
	"github.com/gatehouse-id/gatehouse/services/tokens/dpop"
	"github.com/gatehouse-id/gatehouse/services/tokens/internal/kind"
	"github.com/gatehouse-id/gatehouse/services/tokens/internal/store"
)

// Signer signs JWT claims with the current signing key: ID tokens and
// others with typ JWT, access tokens with typ at+jwt (RFC 9068).
type Signer interface {
	Sign(claims []byte) (string, error)
	SignAccessToken(claims []byte) (string, error)
}

// Minter makes tokens.
type Minter struct {
	Issuer    string
	Signer    Signer
	Hasher    *secrets.Hasher
	Store     *store.Store
	AccessTTL time.Duration
	IDTTL     time.Duration
	Now       func() time.Time
}

// Access describes an access token to issue.
type Access struct {
	ClientID string
	Subject  string
	OrgID    string
	Scopes   []string
	Audience []string
	JWT      bool
	// Record stores a JWT too (tokens of a session or refresh family, so
	// logout and refresh revocation reach them). Opaque tokens are always
	// stored.
	Record    bool
	SessionID string
	RefreshID string
	AuthTime  time.Time
	AMR       []string
	// JKT binds the token to a DPoP key; "" takes the key the request
	// proved (dpop.Key), if any.
	JKT string
	// Act is the act claim of an exchanged token (RFC 8693 §4.1), and
	// ParentID the recorded access token it was exchanged from.
	Act      json.RawMessage
	ParentID string
	// Impersonator and Depth: see store.AccessToken.
	Impersonator string
	Depth        int
	// NotAfter, when set, caps the expiry (an exchanged token lives no
	// longer than its subject token).
	NotAfter time.Time
}

// Issued is a minted access token.
type Issued struct {
	Token     string
	ID        string
	ExpiresAt time.Time
	JKT       string // the DPoP key it is bound to; "" for a bearer token
}

// AccessToken issues an access token; q, if not nil, is the transaction
// to record it in.
func (m *Minter) AccessToken(ctx context.Context, q db.Querier, a Access) (*Issued, error) {
	now := m.Now().UTC().Truncate(time.Second)
	id := secrets.NewTokenID()
	exp := now.Add(m.AccessTTL)
	if !a.NotAfter.IsZero() && a.NotAfter.Before(exp) {
		exp = a.NotAfter.UTC().Truncate(time.Second)
	}
	if a.JKT == "" {
		a.JKT = dpop.Key(ctx)
	}
	out := &Issued{ID: id, ExpiresAt: exp, JKT: a.JKT}
	var hash []byte
	if a.JWT {
		c := accesstoken.Claims{
			Issuer: m.Issuer, Subject: a.Subject, Audience: a.Audience, Expiry: exp.Unix(), IssuedAt: now.Unix(),
			NotBefore: now.Unix(), JTI: id, ClientID: a.ClientID, Scope: strings.Join(a.Scopes, " "),
			AMR: a.AMR, ACR: oauth.ACR(a.AMR),
		}
		if a.JKT != "" {
			c.Cnf = &accesstoken.Confirmation{JKT: a.JKT}
		}
		c.Act = a.Act
		claims, err := json.Marshal(c)
		if err != nil {
			return nil, fmt.Errorf("encode access token: %w", err)
		}
		if out.Token, err = m.Signer.SignAccessToken(claims); err != nil {
			return nil, fmt.Errorf("sign access token: %w", err)
		}
		if !a.Record {
			return out, nil // stateless: nothing to store on the hot path
		}
	} else {
		out.Token = kind.NewAccessToken()
		hash = m.Hasher.TokenKey(out.Token)
	}
	rec := store.NewAccessToken(id, hash, a.ClientID, a.Subject, a.OrgID, a.Scopes, a.Audience, a.AMR, now, exp)
	if a.SessionID != "" {
		rec.SessionID = &a.SessionID
	}
	if a.RefreshID != "" {
		rec.RefreshID = &a.RefreshID
	}
	if !a.AuthTime.IsZero() {
		at := a.AuthTime.UTC()
		rec.AuthTime = &at
	}
	if a.JKT != "" {
		rec.JKT = &a.JKT
	}
	if len(a.Act) > 0 {
		act := string(a.Act)
		rec.Act = &act
	}
	if a.ParentID != "" {
		rec.ParentID = &a.ParentID
	}
	if a.Impersonator != "" {
		rec.Impersonator = &a.Impersonator
	}
	rec.Depth = a.Depth
	if err := m.Store.InsertAccessToken(ctx, q, rec); err != nil {
		return nil, err
	}
	return out, nil
}

// ID describes an ID token (OIDC Core §2).
type ID struct {
	Subject   string
	ClientID  string
	Audience  []string // defaults to [ClientID]
	AuthTime  time.Time
	Nonce     string
	AMR       []string
	SessionID string
	// AccessToken and Code, when returned beside the ID token, are hashed
	// into at_hash and c_hash.
	AccessToken string
	Code        string
	// Claims are added as they are (userinfo claims, when allowed).
	Claims map[string]any
	// NotAfter, when set, caps the expiry.
	NotAfter time.Time
}

// IDToken signs an ID token.
func (m *Minter) IDToken(t ID) (string, error) {
	now := m.Now().UTC().Truncate(time.Second)
	aud := t.Audience
	if len(aud) == 0 {
		aud = []string{t.ClientID}
	}
	c := make(map[string]any, len(t.Claims)+12)
	for k, v := range t.Claims {
		c[k] = v
	}
	c["iss"] = m.Issuer
	c["sub"] = t.Subject
	c["aud"] = aud
	c["azp"] = t.ClientID
	exp := now.Add(m.IDTTL)
	if !t.NotAfter.IsZero() && t.NotAfter.Before(exp) {
		exp = t.NotAfter
	}
	c["exp"] = exp.Unix()
	c["iat"] = now.Unix()
	if !t.AuthTime.IsZero() {
		c["auth_time"] = t.AuthTime.Unix()
	}
	if t.Nonce != "" {
		c["nonce"] = t.Nonce
	}
	if len(t.AMR) > 0 {
		c["amr"] = t.AMR
	}
	if acr := oauth.ACR(t.AMR); acr != "" {
		c["acr"] = acr
	}
	if t.SessionID != "" {
		c["sid"] = t.SessionID
	}
	if t.AccessToken != "" {
		c["at_hash"] = halfHash(t.AccessToken)
	}
	if t.Code != "" {
		c["c_hash"] = halfHash(t.Code)
	}
	claims, err := json.Marshal(c)
	if err != nil {
		return "", fmt.Errorf("encode id token: %w", err)
	}
	return m.Signer.Sign(claims)
}

// halfHash is at_hash / c_hash (OIDC Core §3.1.3.6): the left half of the
// SHA-256 of the value, base64url. SHA-256 matches every algorithm we sign
// with (RS256, ES256; for EdDSA OIDC has no rule, and SHA-256 is what
// relying parties compute).
func halfHash(v string) string {
	sum := sha256.Sum256([]byte(v))
	return base64.RawURLEncoding.EncodeToString(sum[:len(sum)/2])
}

// Response is the token endpoint's JSON (RFC 6749 §5.1).
type Response struct {
	AccessToken  string `json:"access_token"`
	TokenType    string `json:"token_type"`
	ExpiresIn    int64  `json:"expires_in"`
	Scope        string `json:"scope,omitempty"`
	IDToken      string `json:"id_token,omitempty"`
	RefreshToken string `json:"refresh_token,omitempty"`
	// IssuedTokenType is the type of access_token in a token exchange's
	// response (RFC 8693 §2.2.1).
	IssuedTokenType string `json:"issued_token_type,omitempty"`
}

// NewResponse builds the response for an access token: token_type DPoP
// for a bound one (RFC 9449 §5).
func (m *Minter) NewResponse(at *Issued, scopes []string) *Response {
	typ := "Bearer"
	if at.JKT != "" {
		typ = "DPoP"
	}
	return &Response{
		AccessToken: at.Token,
		TokenType:   typ,
		ExpiresIn:   int64(at.ExpiresAt.Sub(m.Now()).Round(time.Second).Seconds()),
		Scope:       strings.Join(scopes, " "),
	}
}
