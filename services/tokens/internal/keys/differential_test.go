package keys_test

import (
	"bytes"
	"crypto/elliptic"
	"encoding/base64"
	"errors"
	"fmt"
	"math/big"
	"strings"
	"testing"

	"github.com/lestrrat-go/jwx/v3/jwk"
	"github.com/lestrrat-go/jwx/v3/jws"

	"github.com/gatehouse-id/gatehouse/pkg/db"
	"github.com/gatehouse-id/gatehouse/services/tokens/internal/keys"
	"github.com/gatehouse-id/gatehouse/services/tokens/internal/keys/keytest"
	"github.com/gatehouse-id/gatehouse/services/tokens/internal/ossltest"
)

// differentialClaims are the payloads both sides sign: the shapes our
// tokens have, and edge cases of the encoding (empty, one byte, lengths
// around every base64 padding class, non-ASCII, a large object).
var differentialClaims = [][]byte{
	[]byte(`{}`),
	[]byte(`{"a":1}`),
	[]byte(`{"ab":1}`),
	[]byte(`{"abc":1}`),
	[]byte(`{"iss":"https://id.example.com","sub":"42","aud":["app","proj"],"exp":1900000000,"iat":1800000000,"jti":"j-1","client_id":"app","scope":"openid profile"}`),
	[]byte(`{"name":"Zoë Ünïcødé 名前 🔑","nonce":"n\u0000\"\\"}`),
	[]byte(`{"pad":"` + strings.Repeat("x", 4000) + `"}`),
	[]byte("x"),
}

// verifiers checks a token with both implementations against what m
// publishes: ours (Manager.Verify) and jwx, given the key set exactly as a
// relying party parses it from the JWKS document.
type verifiers struct {
	m   *keys.Manager
	set jwk.Set
}

func (v verifiers) ours(tok string) ([]byte, error) { return v.m.Verify(tok) }

func (v verifiers) jwx(tok string) ([]byte, error) {
	return jws.Verify([]byte(tok), jws.WithKeySet(v.set, jws.WithRequireKid(true)))
}

// TestDifferentialJWX tests the hand-written compact JWS signer and
// verifier against jwx on every algorithm, with both signing libraries
// (OpenSSL where it loads, always under CI=true; the standard library
// everywhere): what we sign verifies with jwx, what jwx signs with our
// key verifies with ours, both yield the signed payload, and every
// single-character change of either kind of token fails in both, except
// where jwx's lenient base64 decodes the changed segment to the same bytes
// (only the unused low bits of its last character changed): ours refuses
// those as well (RFC 7515 §2 base64url without padding, canonical).
func TestDifferentialJWX(t *testing.T) {
	for _, lib := range []string{keys.LibraryGo, keys.LibraryOpenSSL} {
		for _, alg := range keys.Algorithms {
			t.Run(lib+"/"+alg, func(t *testing.T) {
				if lib == keys.LibraryOpenSSL {
					ossltest.Require(t)
				}
				o := keytest.Options(alg, nil)
				o.Library = lib
				m := keytest.Manager(t, keytest.Open(t, keytest.DBOptions(t, db.SQLite)), o)
				s, err := m.Signer()
				if err != nil {
					t.Fatal(err)
				}
				if want := map[bool]string{true: lib, false: keys.LibraryGo}[alg != keys.EdDSA]; s.Library != want {
					t.Fatalf("signer library: got %q; want %q", s.Library, want)
				}
				v := verifiers{m: m, set: publishedSet(t, m)}
				for i, claims := range differentialClaims {
					ours, err := m.Sign(claims)
					if err != nil {
						t.Fatal(err)
					}
					theirs := jwxSign(t, s, alg, claims)
					for _, c := range []struct{ who, tok string }{{"ours", ours}, {"jwx", theirs}} {
						name := fmt.Sprintf("claims %d signed by %s", i, c.who)
						for _, verify := range []struct {
							who string
							fn  func(string) ([]byte, error)
						}{{"ours", v.ours}, {"jwx", v.jwx}} {
							got, err := verify.fn(c.tok)
							if err != nil || !bytes.Equal(got, claims) {
								t.Fatalf("%s: %s verify: got %q, %v; want the claims", name, verify.who, got, err)
							}
						}
						// Only the first claims are tampered with at every
						// position; the others at a stride (the large one
						// alone is ~5,800 characters).
						stride := 1
						if i > 0 {
							stride = 7
						}
						tamperEverywhere(t, name, c.tok, stride, v)
					}
				}
			})
		}
	}
}

// jwxSign signs claims with jwx using the signer's private key, with the
// same protected header as ours: alg, kid, typ JWT.
func jwxSign(t testing.TB, s *keys.Signer, alg string, claims []byte) string {
	t.Helper()
	h := jws.NewHeaders()
	for k, val := range map[string]any{jws.KeyIDKey: s.KeyID, jws.TypeKey: "JWT"} {
		if err := h.Set(k, val); err != nil {
			t.Fatal(err)
		}
	}
	b, err := jws.Sign(claims, jws.WithKey(jwaOf(alg), s.Key, jws.WithProtectedHeaders(h)))
	if err != nil {
		t.Fatalf("jwx sign: %v", err)
	}
	return string(b)
}

// b64url are the characters of base64url.
const b64url = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"

// tamperEverywhere replaces the character at every stride-th position of
// tok (and always at the last one of each segment) with another base64url
// character, or a '.' with one, and requires both verifiers to refuse the
// result, unless only jwx accepts a segment that its lenient decoder reads
// as the same bytes.
func tamperEverywhere(t *testing.T, name, tok string, stride int, v verifiers) {
	t.Helper()
	positions := map[int]bool{}
	for i := 0; i < len(tok); i += stride {
		positions[i] = true
	}
	for i := range tok {
		if i+1 == len(tok) || tok[i+1] == '.' {
			positions[i] = true // last character of a segment: its low bits are padding
		}
	}
	for i := range positions {
		repl := b64url[(strings.IndexByte(b64url, tok[i])+1)%len(b64url)]
		if tok[i] == '.' {
			repl = 'A'
		}
		bad := tok[:i] + string(repl) + tok[i+1:]
		if _, err := v.ours(bad); !errors.Is(err, keys.ErrInvalidToken) {
			t.Fatalf("%s, position %d changed: ours got %v; want ErrInvalidToken", name, i, err)
		}
		if p, err := v.jwx(bad); err == nil && !sameBytesLenient(tok, bad) {
			t.Fatalf("%s, position %d changed: jwx accepted it with payload %q", name, i, p)
		}
	}
}

// sameBytesLenient reports whether a and b, compact serializations that
// differ in one character, decode to the same bytes segment by segment
// under base64url that ignores the unused bits of the last character.
func sameBytesLenient(a, b string) bool {
	as, bs := strings.Split(a, "."), strings.Split(b, ".")
	if len(as) != len(bs) {
		return false
	}
	for i := range as {
		x, err1 := base64.RawURLEncoding.DecodeString(as[i])
		y, err2 := base64.RawURLEncoding.DecodeString(bs[i])
		if err1 != nil || err2 != nil || !bytes.Equal(x, y) {
			return false
		}
	}
	return true
}

// TestDifferentialCrossAlgorithm: a token jwx signs with our key under
// another algorithm's name, or with another algorithm's key under our
// kid, fails in both verifiers.
func TestDifferentialCrossAlgorithm(t *testing.T) {
	managers := map[string]*keys.Manager{}
	signers := map[string]*keys.Signer{}
	for _, alg := range keys.Algorithms {
		m := keytest.Manager(t, keytest.Open(t, keytest.DBOptions(t, db.SQLite)), keytest.Options(alg, nil))
		s, err := m.Signer()
		if err != nil {
			t.Fatal(err)
		}
		managers[alg], signers[alg] = m, s
	}
	claims := differentialClaims[4]
	for _, alg := range keys.Algorithms {
		v := verifiers{m: managers[alg], set: publishedSet(t, managers[alg])}
		for _, other := range keys.Algorithms {
			if other == alg {
				continue
			}
			// Another algorithm's key, signing under our kid with its own alg.
			os := *signers[other]
			os.KeyID = signers[alg].KeyID
			tok := jwxSign(t, &os, other, claims)
			if _, err := v.ours(tok); !errors.Is(err, keys.ErrInvalidToken) {
				t.Errorf("%s key, %s token under its kid: ours got %v; want ErrInvalidToken", alg, other, err)
			}
			if _, err := v.jwx(tok); err == nil {
				t.Errorf("%s key, %s token under its kid: jwx accepted it", alg, other)
			}
		}
	}
}

// TestDifferentialES256Malleable records a property of ECDSA that both
// verifiers share: (r, n−s) is a second valid signature of the same
// payload (ES256 has no low-s rule, RFC 7518 §3.4). It is harmless here
// because nothing keys on a JWT's bytes — revocation and replay use jti —
// and the test pins that both sides agree, so a change on either side is
// noticed.
func TestDifferentialES256Malleable(t *testing.T) {
	m := keytest.Manager(t, keytest.Open(t, keytest.DBOptions(t, db.SQLite)), keytest.Options(keys.ES256, nil))
	v := verifiers{m: m, set: publishedSet(t, m)}
	claims := differentialClaims[4]
	tok, err := m.Sign(claims)
	if err != nil {
		t.Fatal(err)
	}
	i := strings.LastIndexByte(tok, '.')
	sig, err := base64.RawURLEncoding.DecodeString(tok[i+1:])
	if err != nil || len(sig) != 64 {
		t.Fatalf("signature: %d bytes, %v", len(sig), err)
	}
	n := elliptic.P256().Params().N
	s := new(big.Int).SetBytes(sig[32:])
	flipped := append(append([]byte{}, sig[:32]...), new(big.Int).Sub(n, s).FillBytes(make([]byte, 32))...)
	twin := tok[:i+1] + base64.RawURLEncoding.EncodeToString(flipped)
	for _, verify := range []func(string) ([]byte, error){v.ours, v.jwx} {
		if got, err := verify(twin); err != nil || !bytes.Equal(got, claims) {
			t.Fatalf("(r, n−s): got %q, %v; want the same claims from both verifiers", got, err)
		}
	}
	// (r, s+n) is not a 32-byte scalar; (0, s) and (r, 0) are invalid.
	zero := make([]byte, 32)
	for name, bad := range map[string][]byte{
		"r zero": append(append([]byte{}, zero...), sig[32:]...),
		"s zero": append(append([]byte{}, sig[:32]...), zero...),
		"s = n":  append(append([]byte{}, sig[:32]...), n.FillBytes(make([]byte, 32))...),
	} {
		forged := tok[:i+1] + base64.RawURLEncoding.EncodeToString(bad)
		if _, err := v.ours(forged); !errors.Is(err, keys.ErrInvalidToken) {
			t.Errorf("%s: ours got %v; want ErrInvalidToken", name, err)
		}
		if _, err := v.jwx(forged); err == nil {
			t.Errorf("%s: jwx accepted it", name)
		}
	}
}
