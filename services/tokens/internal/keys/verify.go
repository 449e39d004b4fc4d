package keys

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"strings"
)

// ErrInvalidToken is returned by Verify for anything but a well-formed
// compact JWS signed by one of our published keys.
var ErrInvalidToken = errors.New("invalid token")

// maxTokenLen bounds the work done on attacker-supplied input.
const maxTokenLen = 16 << 10

// verifyHeader is the JOSE header Verify accepts: alg and kid of one of our
// keys; crit, b64, jku, jwk, x5u and x5c (which could redirect key lookup
// or change what is signed) make it refuse the token.
type verifyHeader struct {
	Alg  string          `json:"alg"`
	Kid  string          `json:"kid"`
	Crit json.RawMessage `json:"crit"`
	B64  json.RawMessage `json:"b64"`
	Jku  json.RawMessage `json:"jku"`
	JWK  json.RawMessage `json:"jwk"`
	X5u  json.RawMessage `json:"x5u"`
	X5c  json.RawMessage `json:"x5c"`
}

// Verify checks that token is a compact JWS (RFC 7515 §7.1) signed by the
// published key its header names, with that key's algorithm, and returns
// the decoded payload. It checks no claims (exp, iss, aud are the
// caller's). Every failure is ErrInvalidToken, wrapped with the reason.
func (m *Manager) Verify(token string) ([]byte, error) {
	if len(token) > maxTokenLen {
		return nil, fmt.Errorf("%w: too long", ErrInvalidToken)
	}
	if !compactChars(token) {
		// encoding/base64 skips CR and LF even in Strict mode: without
		// this, a line break anywhere in the signature would give a
		// second spelling of a valid token (found by FuzzVerify).
		return nil, fmt.Errorf("%w: a character outside base64url and '.'", ErrInvalidToken)
	}
	h64, rest, ok := strings.Cut(token, ".")
	p64, s64, ok2 := strings.Cut(rest, ".")
	if !ok || !ok2 || strings.Contains(s64, ".") {
		return nil, fmt.Errorf("%w: not a compact JWS", ErrInvalidToken)
	}
	enc := base64.RawURLEncoding.Strict()
	hraw, err := enc.DecodeString(h64)
	if err != nil {
		return nil, fmt.Errorf("%w: header encoding", ErrInvalidToken)
	}
	var h verifyHeader
	if err := json.Unmarshal(hraw, &h); err != nil {
		return nil, fmt.Errorf("%w: header is not a JSON object", ErrInvalidToken)
	}
	if h.Crit != nil || h.B64 != nil || h.Jku != nil || h.JWK != nil || h.X5u != nil || h.X5c != nil {
		return nil, fmt.Errorf("%w: unsupported header parameter", ErrInvalidToken)
	}
	k, ok := m.KeyByID(h.Kid)
	if !ok {
		return nil, fmt.Errorf("%w: unknown kid", ErrInvalidToken)
	}
	if h.Alg != k.Algorithm {
		return nil, fmt.Errorf("%w: alg %q does not match key %s", ErrInvalidToken, h.Alg, k.ID)
	}
	sig, err := enc.DecodeString(s64)
	if err != nil {
		return nil, fmt.Errorf("%w: signature encoding", ErrInvalidToken)
	}
	if !verifySignature(k.Public, token[:len(h64)+1+len(p64)], sig) {
		return nil, fmt.Errorf("%w: bad signature", ErrInvalidToken)
	}
	payload, err := enc.DecodeString(p64)
	if err != nil {
		return nil, fmt.Errorf("%w: payload encoding", ErrInvalidToken)
	}
	return payload, nil
}

// compactChars reports whether s consists of base64url characters
// (RFC 4648 §5, without padding) and '.' only.
func compactChars(s string) bool {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '-', c == '_', c == '.':
		default:
			return false
		}
	}
	return true
}

func verifySignature(pub crypto.PublicKey, signingInput string, sig []byte) bool {
	switch p := pub.(type) {
	case *rsa.PublicKey:
		d := sha256.Sum256([]byte(signingInput))
		return rsa.VerifyPKCS1v15(p, crypto.SHA256, d[:], sig) == nil
	case *ecdsa.PublicKey:
		if len(sig) != 2*es256Size {
			return false
		}
		d := sha256.Sum256([]byte(signingInput))
		r := new(big.Int).SetBytes(sig[:es256Size])
		s := new(big.Int).SetBytes(sig[es256Size:])
		return ecdsa.Verify(p, d[:], r, s)
	case ed25519.PublicKey:
		return ed25519.Verify(p, []byte(signingInput), sig)
	}
	return false
}
