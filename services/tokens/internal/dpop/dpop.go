// Package dpop verifies DPoP proofs (RFC 9449 §4.3): a JWT the client signs
// for one HTTP request with the key its tokens are bound to. A proof is
// accepted when its header says typ dpop+jwt, an asymmetric alg of
// Algorithms that fits the public key in its jwk header (no private or
// symmetric members), its signature verifies with that key, htm and htu
// name the request (htu without query and fragment), iat is recent, ath is
// the hash of the access token presented with it (resources only), nonce
// is the server's when the server requires one, and its jti has not been
// seen with the same key within the window (a ReplayStore shared by every
// replica). The proof's key is named by its RFC 7638 thumbprint (jkt).
//
// The token endpoint binds the tokens it issues to a proof's key (WithKey,
// Key); userinfo checks the proof a bound token comes with.
package dpop

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/lestrrat-go/jwx/v3/jwa"
	"github.com/lestrrat-go/jwx/v3/jwk"
	"github.com/lestrrat-go/jwx/v3/jws"
)

// Algorithms are the proof algorithms accepted (discovery's
// dpop_signing_alg_values_supported).
var Algorithms = []string{"ES256", "RS256", "PS256", "EdDSA"}

// ErrInvalid wraps every reason a proof is refused (invalid_dpop_proof);
// the reason is for logs and the error description.
var ErrInvalid = errors.New("invalid DPoP proof")

// ErrUseNonce: the proof lacks the nonce the server requires, or carries
// an old one (use_dpop_nonce, with a DPoP-Nonce header).
var ErrUseNonce = errors.New("use_dpop_nonce")

// ErrReplayed is a ReplayStore's answer for a jti seen before.
var ErrReplayed = errors.New("DPoP proof replayed")

// ReplayStore remembers (jkt, jti) pairs until they expire; Use answers
// ErrReplayed for a pair seen before.
type ReplayStore interface {
	Use(ctx context.Context, jkt, jti string, until time.Time) error
}

// Verifier checks proofs.
type Verifier struct {
	Replay ReplayStore
	// Nonces, when set, makes a server nonce required (use_dpop_nonce
	// until the proof carries a valid one).
	Nonces *Nonces
	// Window is how old a proof's iat may be (default 60 s); Skew how far
	// in the future (default 5 s, clocks differ).
	Window, Skew time.Duration
	// NotAfter refuses proofs issued up to it: a replay store that may
	// have lost its last entries (a start after a crash) cannot tell
	// their replays.
	NotAfter time.Time
	Now      func() time.Time
}

// Request is what a proof must name.
type Request struct {
	Method string // htm
	URL    string // htu: the request's public URL (query and fragment are ignored)
	// AccessToken is the token presented with the proof at a resource
	// (ath); empty at the token endpoint, where a proof carries no ath.
	AccessToken string
}

// Proof is a verified proof.
type Proof struct {
	JKT      string // base64url SHA-256 JWK thumbprint (RFC 7638) of the proof's key
	JTI      string
	IssuedAt time.Time
}

// maxProof bounds a proof before it is parsed.
const maxProof = 8 << 10

// privateMembers are JWK members of private or symmetric keys (RFC 7518 §6).
var privateMembers = []string{"d", "p", "q", "dp", "dq", "qi", "oth", "k"}

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalid, fmt.Sprintf(format, args...))
}

// Verify checks raw, the DPoP header's value, for r.
func (v *Verifier) Verify(ctx context.Context, raw string, r Request) (*Proof, error) {
	if raw == "" || len(raw) > maxProof || strings.Count(raw, ".") != 2 {
		return nil, invalid("not a compact JWS")
	}
	parts := strings.SplitN(raw, ".", 3)
	headerJSON, err := base64.RawURLEncoding.DecodeString(parts[0])
	if err != nil {
		return nil, invalid("malformed header")
	}
	var header struct {
		Typ  string          `json:"typ"`
		Alg  string          `json:"alg"`
		JWK  json.RawMessage `json:"jwk"`
		Crit []string        `json:"crit"`
	}
	if err := json.Unmarshal(headerJSON, &header); err != nil {
		return nil, invalid("malformed header")
	}
	switch {
	case header.Typ != "dpop+jwt":
		return nil, invalid("typ must be dpop+jwt")
	case !slices.Contains(Algorithms, header.Alg):
		return nil, invalid("alg %q is not one of %v", header.Alg, Algorithms)
	case len(header.JWK) == 0:
		return nil, invalid("no jwk in the header")
	case len(header.Crit) > 0:
		return nil, invalid("crit is not supported")
	}
	var members map[string]json.RawMessage
	if err := json.Unmarshal(header.JWK, &members); err != nil {
		return nil, invalid("malformed jwk")
	}
	for _, m := range privateMembers {
		if _, ok := members[m]; ok {
			return nil, invalid("the jwk is not a public key (member %q)", m)
		}
	}
	key, err := jwk.ParseKey(header.JWK)
	if err != nil {
		return nil, invalid("malformed jwk")
	}
	if err := fits(header.Alg, key); err != nil {
		return nil, err
	}
	alg, ok := jwa.LookupSignatureAlgorithm(header.Alg)
	if !ok {
		return nil, invalid("alg %q", header.Alg)
	}
	payload, err := jws.Verify([]byte(raw), jws.WithKey(alg, key))
	if err != nil {
		return nil, invalid("signature does not verify with the jwk")
	}
	var claims struct {
		JTI   string      `json:"jti"`
		HTM   string      `json:"htm"`
		HTU   string      `json:"htu"`
		IAT   json.Number `json:"iat"`
		ATH   *string     `json:"ath"`
		Nonce *string     `json:"nonce"`
	}
	d := json.NewDecoder(bytes.NewReader(payload))
	d.UseNumber()
	if err := d.Decode(&claims); err != nil {
		return nil, invalid("malformed claims")
	}
	now := time.Now
	if v.Now != nil {
		now = v.Now
	}
	window, skew := v.Window, v.Skew
	if window == 0 {
		window = time.Minute
	}
	if skew == 0 {
		skew = 5 * time.Second
	}
	iatSec, err := claims.IAT.Float64()
	t := now()
	iat := time.Unix(int64(iatSec), 0)
	switch {
	case claims.JTI == "" || len(claims.JTI) > 256:
		return nil, invalid("jti is required (at most 256 characters)")
	case claims.HTM != r.Method:
		return nil, invalid("htm %q is not the request's method %s", claims.HTM, r.Method)
	case !sameURI(claims.HTU, r.URL):
		return nil, invalid("htu %q is not the request's URI", claims.HTU)
	case err != nil || claims.IAT == "":
		return nil, invalid("iat is required")
	case iat.Before(t.Add(-window)):
		return nil, invalid("iat is older than %v", window)
	case iat.After(t.Add(skew)):
		return nil, invalid("iat is in the future")
	case !v.NotAfter.IsZero() && !iat.After(v.NotAfter):
		return nil, invalid("iat is before the server's start; make a new proof")
	}
	switch {
	case r.AccessToken != "" && (claims.ATH == nil || *claims.ATH != AccessTokenHash(r.AccessToken)):
		return nil, invalid("ath is not the hash of the access token")
	case r.AccessToken == "" && claims.ATH != nil:
		return nil, invalid("ath without an access token")
	}
	if v.Nonces != nil && (claims.Nonce == nil || !v.Nonces.Valid(*claims.Nonce)) {
		return nil, ErrUseNonce
	}
	tp, err := key.Thumbprint(crypto.SHA256)
	if err != nil {
		return nil, invalid("jwk thumbprint: %v", err)
	}
	p := &Proof{JKT: base64.RawURLEncoding.EncodeToString(tp), JTI: claims.JTI, IssuedAt: iat}
	if v.Replay != nil {
		// Kept until the proof could no longer be accepted anyway.
		if err := v.Replay.Use(ctx, p.JKT, p.JTI, iat.Add(window+skew)); err != nil {
			if errors.Is(err, ErrReplayed) {
				return nil, invalid("jti was used before")
			}
			return nil, err
		}
	}
	return p, nil
}

// fits checks that alg suits the key's type (and RSA keys are at least
// 2048 bits).
func fits(alg string, key jwk.Key) error {
	var raw any
	if err := jwk.Export(key, &raw); err != nil {
		return invalid("unusable jwk")
	}
	switch k := raw.(type) {
	case *rsa.PublicKey:
		if alg != "RS256" && alg != "PS256" {
			return invalid("alg %s does not fit an RSA key", alg)
		}
		if k.N.BitLen() < 2048 {
			return invalid("an RSA key of %d bits is too short", k.N.BitLen())
		}
	case *ecdsa.PublicKey:
		if alg != "ES256" || k.Curve != elliptic.P256() {
			return invalid("alg %s does not fit the EC key", alg)
		}
	case ed25519.PublicKey:
		if alg != "EdDSA" {
			return invalid("alg %s does not fit an Ed25519 key", alg)
		}
	default:
		return invalid("the jwk is not a public RSA, EC P-256 or Ed25519 key")
	}
	return nil
}

// AccessTokenHash is ath: base64url(SHA-256(token)) (RFC 9449 §4.2).
func AccessTokenHash(token string) string {
	h := sha256.Sum256([]byte(token))
	return base64.RawURLEncoding.EncodeToString(h[:])
}

// sameURI compares htu with the request's URI by RFC 9449 §4.3: without
// query and fragment, scheme and host case-insensitively, default ports
// implied.
func sameURI(htu, want string) bool {
	a, err1 := url.Parse(htu)
	b, err2 := url.Parse(want)
	if err1 != nil || err2 != nil || !a.IsAbs() || a.Opaque != "" || a.User != nil {
		return false
	}
	norm := func(u *url.URL) string {
		host := strings.ToLower(u.Hostname())
		port := u.Port()
		scheme := strings.ToLower(u.Scheme)
		if (scheme == "https" && port == "443") || (scheme == "http" && port == "80") {
			port = ""
		}
		if port != "" {
			host += ":" + port
		}
		path := u.EscapedPath()
		if path == "" {
			path = "/"
		}
		return scheme + "://" + host + path
	}
	return norm(a) == norm(b)
}
