package secrets

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
)

// Purposes bind derived subkeys, so a value encrypted for one use cannot be
// decrypted as another.
const (
	PurposeSigningKeys = "gatehouse signing keys v1"
	PurposeIdPSecrets  = "gatehouse idp client secrets v1"
	PurposeSecretHash  = "gatehouse secret hash v1"
	// PurposeFactorSecrets seals users' TOTP seeds.
	PurposeFactorSecrets = "gatehouse factor secrets v1"
	// PurposeMail seals the outbox's messages (their one-time links).
	PurposeMail = "gatehouse mail v1"
	// PurposeDPoPNonces keys the DPoP server nonces every replica accepts.
	PurposeDPoPNonces = "gatehouse dpop nonces v1"
	// PurposeLoginState seals the state a login page's form carries (the
	// code page's: authn's login package).
	PurposeLoginState = "gatehouse login state v1"
)

// ErrDecrypt is returned for a ciphertext that is corrupt, truncated or was
// made with another key or purpose.
var ErrDecrypt = errors.New("secrets: cannot decrypt")

func subkey(master []byte, purpose string) ([]byte, error) {
	if len(master) != 32 {
		return nil, fmt.Errorf("secrets: master key must be 32 bytes, got %d", len(master))
	}
	return hkdf.Key(sha256.New, master, nil, purpose, 32)
}

// DeriveKey is the 32-byte subkey of master for purpose (HKDF-SHA256),
// for a MAC every replica computes alike.
func DeriveKey(master []byte, purpose string) ([]byte, error) { return subkey(master, purpose) }

// Cipher encrypts small values at rest with AES-256-GCM under a subkey of
// the master key.
type Cipher struct{ aead cipher.AEAD }

// NewCipher derives the subkey for purpose from master.
func NewCipher(master []byte, purpose string) (*Cipher, error) {
	k, err := subkey(master, purpose)
	if err != nil {
		return nil, err
	}
	block, err := aes.NewCipher(k)
	if err != nil {
		return nil, fmt.Errorf("secrets: %w", err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, fmt.Errorf("secrets: %w", err)
	}
	return &Cipher{aead: aead}, nil
}

// Encrypt seals plaintext; aad (e.g. the row id) must be given again to
// decrypt, which stops a ciphertext being moved to another row.
func (c *Cipher) Encrypt(plaintext, aad []byte) ([]byte, error) {
	nonce := make([]byte, c.aead.NonceSize(), c.aead.NonceSize()+len(plaintext)+c.aead.Overhead())
	if _, err := rand.Read(nonce); err != nil {
		return nil, fmt.Errorf("secrets: nonce: %w", err)
	}
	return c.aead.Seal(nonce, nonce, plaintext, aad), nil
}

// Decrypt opens a value made by Encrypt with the same aad.
func (c *Cipher) Decrypt(ciphertext, aad []byte) ([]byte, error) {
	n := c.aead.NonceSize()
	if len(ciphertext) < n+c.aead.Overhead() {
		return nil, ErrDecrypt
	}
	out, err := c.aead.Open(nil, ciphertext[:n], ciphertext[n:], aad)
	if err != nil {
		return nil, ErrDecrypt
	}
	return out, nil
}

// Hasher makes keyed hashes of random, high-entropy secrets (client secrets,
// opaque tokens). A slow password hash would add nothing for such values but
// latency on the token endpoint; the key keeps a leaked table useless.
type Hasher struct{ key []byte }

// NewHasher derives the hashing key from master.
func NewHasher(master []byte) (*Hasher, error) {
	k, err := subkey(master, PurposeSecretHash)
	if err != nil {
		return nil, err
	}
	return &Hasher{key: k}, nil
}

// Hash returns HMAC-SHA-256(secret).
func (h *Hasher) Hash(secret string) []byte {
	m := hmac.New(sha256.New, h.key)
	m.Write([]byte(secret))
	return m.Sum(nil)
}

// TokenKey returns the key of an opaque token's record: for a token that
// ends in one of NewOrderedToken's form (after a kind prefix, or none),
// its 6 time bytes followed by Hash(token), so keys of tokens issued
// together are near each other in an index; for any other token (those
// issued before ordered tokens), Hash(token). The HMAC covers the whole
// token: a forged time or prefix changes it too, so it finds no record.
func (h *Hasher) TokenKey(token string) []byte {
	mac := h.Hash(token)
	if len(token) < OrderedTokenLen {
		return mac
	}
	ordered := token[len(token)-OrderedTokenLen:]
	var t [orderedTimeBytes]byte
	if n, err := base64.RawURLEncoding.Decode(t[:], []byte(ordered[:8])); err != nil || n != orderedTimeBytes {
		return mac
	}
	return append(t[:], mac...)
}

// Verify compares secret with a stored hash in constant time.
func (h *Hasher) Verify(secret string, hash []byte) bool {
	return len(hash) == sha256.Size && subtle.ConstantTimeCompare(h.Hash(secret), hash) == 1
}
