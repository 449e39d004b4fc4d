package keys

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
)

// TypeLogoutToken is the JOSE typ of back-channel logout tokens (OpenID
// Connect Back-Channel Logout 1.0 §2.4): a relying party that checks it
// cannot take an ID token for a logout token or the reverse.
const TypeLogoutToken = "logout+jwt"

// SignTyped is Sign with the header's typ set to typ, for tokens off the
// hot path (the header is serialized per call).
func (s *Signer) SignTyped(typ string, claims []byte) (string, error) {
	h, err := json.Marshal(joseHeader{Alg: s.Algorithm, Kid: s.KeyID, Typ: typ})
	if err != nil {
		return "", fmt.Errorf("encode JWS header: %w", err)
	}
	return s.sign(append(base64.RawURLEncoding.AppendEncode(nil, h), '.'), claims)
}

// SignLogoutToken signs a back-channel logout token's claims with the
// current key, the one ID tokens are signed with (typ logout+jwt).
func (m *Manager) SignLogoutToken(claims []byte) (string, error) {
	s, err := m.Signer()
	if err != nil {
		return "", err
	}
	return s.SignTyped(TypeLogoutToken, claims)
}
