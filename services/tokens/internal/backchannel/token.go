package backchannel

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/gatehouse-id/gatehouse/pkg/secrets"
	"github.com/gatehouse-id/gatehouse/services/tokens/internal/store"
)

// Event is the member of a logout token's events claim that makes it one
// (Back-Channel Logout 1.0 §2.4).
const Event = "http://schemas.openid.net/event/backchannel-logout"

// TokenTTL is a logout token's lifetime: it is sent at once, and a new
// one is signed for every try.
const TokenTTL = 2 * time.Minute

// Signer signs a logout token's claims with the current signing key, the
// ID tokens' (keys.Manager), with typ logout+jwt.
type Signer interface {
	SignLogoutToken(claims []byte) (string, error)
}

// Claims are a logout token's claims (Back-Channel Logout 1.0 §2.4): no
// nonce, which would let it pass for an ID token.
type Claims struct {
	Issuer   string              `json:"iss"`
	Audience string              `json:"aud"`
	IssuedAt int64               `json:"iat"`
	Expiry   int64               `json:"exp"`
	JTI      string              `json:"jti"`
	Subject  string              `json:"sub"`
	SID      string              `json:"sid"`
	Events   map[string]struct{} `json:"events"`
}

// NewClaims are the claims of the logout token of l issued by issuer at now.
func NewClaims(issuer string, l store.Logout, now time.Time) Claims {
	now = now.UTC().Truncate(time.Second)
	return Claims{
		Issuer: issuer, Audience: l.ClientID, IssuedAt: now.Unix(), Expiry: now.Add(TokenTTL).Unix(),
		JTI: secrets.RandomToken(16), Subject: l.UserID, SID: l.SessionID,
		Events: map[string]struct{}{Event: {}},
	}
}

// sign makes the logout token of l.
func sign(s Signer, issuer string, l store.Logout, now time.Time) (string, error) {
	b, err := json.Marshal(NewClaims(issuer, l, now))
	if err != nil {
		return "", fmt.Errorf("encode logout token: %w", err)
	}
	t, err := s.SignLogoutToken(b)
	if err != nil {
		return "", fmt.Errorf("sign logout token: %w", err)
	}
	return t, nil
}
