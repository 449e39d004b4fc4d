package lifecycle

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"

	"github.com/gatehouse-id/gatehouse/pkg/oauth"
)

// ValidVerifier reports whether v is a well-formed PKCE code_verifier
// (RFC 7636 §4.1): 43 to 128 characters of [A-Z] / [a-z] / [0-9] / "-" /
// "." / "_" / "~".
func ValidVerifier(v string) bool {
	if len(v) < 43 || len(v) > 128 {
		return false
	}
	for i := 0; i < len(v); i++ {
		if !unreserved(v[i]) {
			return false
		}
	}
	return true
}

func unreserved(c byte) bool {
	return 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '.' || c == '_' || c == '~'
}

// ValidChallenge reports whether c can be an S256 code_challenge:
// BASE64URL(SHA-256(verifier)) without padding is exactly 43 characters of
// the base64url alphabet.
func ValidChallenge(c string) bool {
	if len(c) != 43 {
		return false
	}
	b, err := base64.RawURLEncoding.Strict().DecodeString(c)
	return err == nil && len(b) == sha256.Size
}

// S256 is the S256 code_challenge of a verifier (RFC 7636 §4.2).
func S256(verifier string) string {
	sum := sha256.Sum256([]byte(verifier))
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

// checkPKCE binds the exchange to the authorization request (RFC 7636
// §4.6): a code made with a challenge needs the matching verifier; a code
// made without one refuses a verifier (RFC 9700 §2.1.1, against PKCE
// downgrade). A missing or unexpected verifier is invalid_request; a
// mismatch is invalid_grant. The verifier's format was checked by the
// caller.
func checkPKCE(challenge, verifier string) error {
	switch {
	case challenge == "" && verifier == "":
		return nil
	case challenge == "":
		return oauth.New(oauth.InvalidRequest, "code_verifier sent, but the authorization request had no code_challenge")
	case verifier == "":
		return oauth.New(oauth.InvalidRequest, "code_verifier is required")
	case subtle.ConstantTimeCompare([]byte(S256(verifier)), []byte(challenge)) != 1:
		return oauth.New(oauth.InvalidGrant, "code_verifier does not match the code_challenge")
	}
	return nil
}
