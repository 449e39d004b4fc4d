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
	"math/big"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/lestrrat-go/jwx/v3/jws/jwsbb"
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
		JWK  *publicJWK      `json:"jwk"`
		Crit json.RawMessage `json:"crit"`
	}
	if err := json.Unmarshal(headerJSON, &header); err != nil {
		return nil, invalid("malformed header")
	}
	switch {
	case header.Typ != "dpop+jwt":
		return nil, invalid("typ must be dpop+jwt")
	case !slices.Contains(Algorithms, header.Alg):
		return nil, invalid("alg %q is not one of %v", header.Alg, Algorithms)
	case header.JWK == nil:
		return nil, invalid("no jwk in the header")
	case len(header.Crit) > 0:
		return nil, invalid("crit is not supported")
	}
	key, thumbprint, err := header.JWK.parse(header.Alg)
	if err != nil {
		return nil, err
	}
	sig, err := base64.RawURLEncoding.DecodeString(parts[2])
	if err != nil {
		return nil, invalid("malformed signature")
	}
	// The signature by jwx's building blocks, over the signing input as
	// sent: the message is split and its header decoded once, here.
	if err := jwsbb.Verify(key, header.Alg, []byte(raw[:len(parts[0])+1+len(parts[1])]), sig); err != nil {
		return nil, invalid("signature does not verify with the jwk")
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return nil, invalid("malformed claims")
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
	p := &Proof{JKT: thumbprint, JTI: claims.JTI, IssuedAt: iat}
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

// publicJWK is a proof's jwk header: the members of the public keys the
// algorithms take (RFC 7518 §6), and those of private or symmetric keys,
// which refuse it.
type publicJWK struct {
	Kty string `json:"kty"`
	Crv string `json:"crv"`
	X   string `json:"x"`
	Y   string `json:"y"`
	N   string `json:"n"`
	E   string `json:"e"`
	// Private and symmetric members.
	D   *json.RawMessage `json:"d"`
	P   *json.RawMessage `json:"p"`
	Q   *json.RawMessage `json:"q"`
	DP  *json.RawMessage `json:"dp"`
	DQ  *json.RawMessage `json:"dq"`
	QI  *json.RawMessage `json:"qi"`
	Oth *json.RawMessage `json:"oth"`
	K   *json.RawMessage `json:"k"`
}

// parse returns the public key of alg's type the members hold, and its
// RFC 7638 thumbprint (base64url SHA-256 of the required members in
// lexicographic order, each in its canonical encoding).
func (j *publicJWK) parse(alg string) (crypto.PublicKey, string, error) {
	for _, m := range [...]*json.RawMessage{j.D, j.P, j.Q, j.DP, j.DQ, j.QI, j.Oth, j.K} {
		if m != nil {
			return nil, "", invalid("the jwk is not a public key (it has a private or symmetric member)")
		}
	}
	b64 := base64.RawURLEncoding
	thumbprint := func(members string) string {
		sum := sha256.Sum256([]byte(members))
		return b64.EncodeToString(sum[:])
	}
	switch j.Kty {
	case "EC":
		x, errX := b64.DecodeString(j.X)
		y, errY := b64.DecodeString(j.Y)
		if j.Crv != "P-256" || errX != nil || errY != nil || len(x) != 32 || len(y) != 32 {
			return nil, "", invalid("the jwk is not a P-256 key")
		}
		if alg != "ES256" {
			return nil, "", invalid("alg %s does not fit the EC key", alg)
		}
		key, err := ecdsa.ParseUncompressedPublicKey(elliptic.P256(), append(append([]byte{4}, x...), y...))
		if err != nil {
			return nil, "", invalid("the jwk is not a point of P-256")
		}
		return key, thumbprint(`{"crv":"P-256","kty":"EC","x":"` + b64.EncodeToString(x) + `","y":"` + b64.EncodeToString(y) + `"}`), nil
	case "RSA":
		n, errN := b64.DecodeString(j.N)
		e, errE := b64.DecodeString(j.E)
		if errN != nil || errE != nil || len(e) == 0 || len(e) > 4 {
			return nil, "", invalid("malformed RSA jwk")
		}
		if alg != "RS256" && alg != "PS256" {
			return nil, "", invalid("alg %s does not fit an RSA key", alg)
		}
		key := &rsa.PublicKey{N: new(big.Int).SetBytes(n), E: int(new(big.Int).SetBytes(e).Int64())}
		if key.N.BitLen() < 2048 || key.N.BitLen() > 8192 {
			return nil, "", invalid("an RSA key of %d bits (2048 to 8192 are accepted)", key.N.BitLen())
		}
		if key.E < 3 || key.E%2 == 0 {
			return nil, "", invalid("the RSA exponent is not an odd number above 2")
		}
		return key, thumbprint(`{"e":"` + b64.EncodeToString(big.NewInt(int64(key.E)).Bytes()) + `","kty":"RSA","n":"` +
			b64.EncodeToString(key.N.Bytes()) + `"}`), nil
	case "OKP":
		x, err := b64.DecodeString(j.X)
		if j.Crv != "Ed25519" || err != nil || len(x) != ed25519.PublicKeySize {
			return nil, "", invalid("the jwk is not an Ed25519 key")
		}
		if alg != "EdDSA" {
			return nil, "", invalid("alg %s does not fit an Ed25519 key", alg)
		}
		return ed25519.PublicKey(x), thumbprint(`{"crv":"Ed25519","kty":"OKP","x":"` + b64.EncodeToString(x) + `"}`), nil
	}
	return nil, "", invalid("the jwk is not a public RSA, EC P-256 or Ed25519 key")
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
