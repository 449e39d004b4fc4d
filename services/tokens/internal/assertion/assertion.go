// Package assertion verifies signed JWT assertions presented to the token
// endpoint: client assertions (private_key_jwt, RFC 7523 §2.2) and JWT-profile
// authorization grants (RFC 7523 §2.1). The key is chosen by the caller from
// the header's kid among the registered public keys; the signature, issuer
// and subject, audience (our issuer or token endpoint, as string or array),
// expiry, issued-at (not older than MaxAge), a lifetime (exp − iat) of at
// most MaxAge and key expiry are checked, and a jti is required and may
// not be used twice within the assertion's lifetime.
package assertion

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/lestrrat-go/jwx/v3/jwa"
	"github.com/lestrrat-go/jwx/v3/jwt"
)

// ErrInvalid wraps every reason an assertion is refused; the reason is for
// logs, clients get a generic description.
var ErrInvalid = errors.New("invalid assertion")

// ErrReplayed is returned by a ReplayStore for a jti seen before.
var ErrReplayed = errors.New("assertion jti already used")

// ReplayStore remembers jti values until they expire.
type ReplayStore interface {
	// Use records jti for issuer until exp; ErrReplayed when already there.
	Use(ctx context.Context, issuer, jti string, exp time.Time) error
}

// Key is a registered public key.
type Key struct {
	ID        string
	PEM       string
	ExpiresAt *time.Time
}

// Claims are the verified claims of an assertion.
type Claims struct {
	Issuer   string
	Subject  string
	Audience []string
	Expiry   time.Time
	IssuedAt time.Time
	JTI      string
}

// Verifier checks assertions for one issuer.
type Verifier struct {
	// Audiences accepted in aud: the issuer URL and the token endpoint URL.
	Audiences []string
	Replay    ReplayStore
	MaxAge    time.Duration // oldest accepted iat (default 1h)
	Skew      time.Duration // clock skew allowed on exp/iat/nbf (default 1 minute)
	Now       func() time.Time
	// NoSubject: sub is not required, and iss alone must name the
	// subject argument (request objects, RFC 9101 §4).
	NoSubject bool
}

// KeyID returns the kid of a compact JWS without verifying it. The JWS
// JSON serialization, which jws.Parse would also read, is refused: an
// assertion is a JWT (RFC 7523 §2.1, §2.2), and Verify reads only the
// compact form.
func KeyID(raw string) (string, error) {
	if strings.Count(raw, ".") != 2 {
		return "", fmt.Errorf("%w: not a compact JWS", ErrInvalid)
	}
	// The header read strictly (base64url, one JSON object), as the
	// signature check reads it; jwx's parser is more lenient (the standard
	// alphabet, data after the object), and the kid only picks the key.
	b, err := base64.RawURLEncoding.DecodeString(raw[:strings.IndexByte(raw, '.')])
	if err != nil {
		return "", fmt.Errorf("%w: the header is not base64url", ErrInvalid)
	}
	// A map: member names are exact (a struct field would also take "KID").
	var h map[string]json.RawMessage
	if err := json.Unmarshal(b, &h); err != nil {
		return "", fmt.Errorf("%w: the header is not a JSON object", ErrInvalid)
	}
	var kid string
	if err := json.Unmarshal(h["kid"], &kid); err != nil || kid == "" {
		return "", fmt.Errorf("%w: no kid in header", ErrInvalid)
	}
	return kid, nil
}

// ParsePublicKey parses a PKIX PEM public key.
func ParsePublicKey(p string) (crypto.PublicKey, error) {
	block, _ := pem.Decode([]byte(p))
	if block == nil {
		return nil, errors.New("no PEM block")
	}
	return x509.ParsePKIXPublicKey(block.Bytes)
}

func algFor(pub crypto.PublicKey) (jwa.SignatureAlgorithm, error) {
	switch k := pub.(type) {
	case *rsa.PublicKey:
		return jwa.RS256(), nil
	case *ecdsa.PublicKey:
		if k.Curve == elliptic.P256() {
			return jwa.ES256(), nil
		}
	case ed25519.PublicKey:
		return jwa.EdDSA(), nil
	}
	return jwa.EmptySignatureAlgorithm(), fmt.Errorf("unsupported key type %T", pub)
}

// Verify checks raw against key and, when subject is not empty, requires
// iss and sub to equal it.
func (v *Verifier) Verify(ctx context.Context, raw string, key Key, subject string) (*Claims, error) {
	now := time.Now
	if v.Now != nil {
		now = v.Now
	}
	maxAge, skew := v.MaxAge, v.Skew
	if maxAge == 0 {
		maxAge = time.Hour
	}
	if skew == 0 {
		skew = time.Minute
	}
	t := now()
	if key.ExpiresAt != nil && !t.Before(*key.ExpiresAt) {
		return nil, fmt.Errorf("%w: key %s expired", ErrInvalid, key.ID)
	}
	pub, err := ParsePublicKey(key.PEM)
	if err != nil {
		return nil, fmt.Errorf("%w: registered key %s: %v", ErrInvalid, key.ID, err)
	}
	alg, err := algFor(pub)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	tok, err := jwt.ParseString(raw, jwt.WithKey(alg, pub), jwt.WithValidate(false))
	if err != nil {
		return nil, fmt.Errorf("%w: signature: %v", ErrInvalid, err)
	}
	c := &Claims{}
	c.Issuer, _ = tok.Issuer()
	c.Subject, _ = tok.Subject()
	c.Audience, _ = tok.Audience()
	c.JTI, _ = tok.JwtID()
	exp, hasExp := tok.Expiration()
	iat, hasIat := tok.IssuedAt()
	c.Expiry, c.IssuedAt = exp, iat
	switch {
	case v.NoSubject && (subject == "" || c.Issuer != subject):
		return nil, fmt.Errorf("%w: iss %q does not name %q", ErrInvalid, c.Issuer, subject)
	case v.NoSubject:
	case subject != "" && (c.Issuer != subject || c.Subject != subject):
		return nil, fmt.Errorf("%w: iss %q / sub %q do not name %q", ErrInvalid, c.Issuer, c.Subject, subject)
	case c.Issuer == "" || c.Subject == "":
		return nil, fmt.Errorf("%w: iss and sub are required", ErrInvalid)
	}
	switch {
	case !slices.ContainsFunc(c.Audience, func(a string) bool { return slices.Contains(v.Audiences, a) }):
		return nil, fmt.Errorf("%w: aud %v does not contain the issuer", ErrInvalid, c.Audience)
	case !hasExp:
		return nil, fmt.Errorf("%w: exp is required", ErrInvalid)
	case !t.Before(exp.Add(skew)):
		return nil, fmt.Errorf("%w: expired at %v", ErrInvalid, exp)
	case !hasIat:
		return nil, fmt.Errorf("%w: iat is required", ErrInvalid)
	case iat.After(t.Add(skew)):
		return nil, fmt.Errorf("%w: iat in the future", ErrInvalid)
	case t.Sub(iat) > maxAge:
		return nil, fmt.Errorf("%w: iat older than %v", ErrInvalid, maxAge)
	case exp.Sub(iat) > maxAge:
		// A long-lived assertion is a bearer credential for that long.
		return nil, fmt.Errorf("%w: exp − iat is longer than %v", ErrInvalid, maxAge)
	case c.JTI == "":
		// Without a jti a captured assertion could be replayed.
		return nil, fmt.Errorf("%w: jti is required", ErrInvalid)
	}
	if nbf, ok := tok.NotBefore(); ok && nbf.After(t.Add(skew)) {
		return nil, fmt.Errorf("%w: not valid before %v", ErrInvalid, nbf)
	}
	if v.Replay != nil {
		// Remember it until it could no longer be accepted anyway.
		until := exp.Add(skew)
		if err := v.Replay.Use(ctx, c.Issuer, c.JTI, until); err != nil {
			if errors.Is(err, ErrReplayed) {
				return nil, fmt.Errorf("%w: jti replayed", ErrInvalid)
			}
			return nil, err
		}
	}
	return c, nil
}
