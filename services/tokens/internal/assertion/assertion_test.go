package assertion

import (
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lestrrat-go/jwx/v3/jwa"
	"github.com/lestrrat-go/jwx/v3/jws"
	"github.com/lestrrat-go/jwx/v3/jwt"
)

type memReplay struct {
	mu   sync.Mutex
	seen map[string]bool
}

func (m *memReplay) Use(_ context.Context, issuer, jti string, _ time.Time) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.seen[issuer+" "+jti] {
		return ErrReplayed
	}
	m.seen[issuer+" "+jti] = true
	return nil
}

// TestVerifyRules: every rule of an assertion, each broken alone.
func TestVerifyRules(t *testing.T) {
	priv, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	other, _ := rsa.GenerateKey(rand.Reader, 2048)
	der, _ := x509.MarshalPKIXPublicKey(&priv.PublicKey)
	pubPEM := string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}))
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	const iss = "https://id.example.com"
	type claims struct {
		iss, sub, jti string
		aud           []string
		iat, exp, nbf time.Time
		noIat, noExp  bool
		key           *rsa.PrivateKey
	}
	good := func() claims {
		return claims{iss: "u1", sub: "u1", jti: "j", aud: []string{iss}, iat: now.Add(-time.Minute), exp: now.Add(5 * time.Minute), key: priv}
	}
	sign := func(c claims) string {
		b := jwt.NewBuilder().Issuer(c.iss).Subject(c.sub).Audience(c.aud)
		if c.jti != "" {
			b = b.JwtID(c.jti)
		}
		if !c.noIat {
			b = b.IssuedAt(c.iat)
		}
		if !c.noExp {
			b = b.Expiration(c.exp)
		}
		if !c.nbf.IsZero() {
			b = b.NotBefore(c.nbf)
		}
		tok, err := b.Build()
		if err != nil {
			t.Fatal(err)
		}
		hdr := jws.NewHeaders()
		_ = hdr.Set(jws.KeyIDKey, "k1")
		raw, err := jwt.Sign(tok, jwt.WithKey(jwa.RS256(), c.key, jws.WithProtectedHeaders(hdr)))
		if err != nil {
			t.Fatal(err)
		}
		return string(raw)
	}
	expired := now.Add(-time.Second)
	expiresNow, expiresLater := now, now.Add(time.Second)
	cases := []struct {
		name   string
		edit   func(*claims)
		key    Key
		reason string // "" = accepted
	}{
		{"valid", func(*claims) {}, Key{}, ""},
		{"wrong key", func(c *claims) { c.key = other }, Key{}, "signature"},
		{"iss is not the subject", func(c *claims) { c.iss = "u2" }, Key{}, "do not name"},
		{"sub is not the subject", func(c *claims) { c.sub = "u2" }, Key{}, "do not name"},
		{"foreign audience", func(c *claims) { c.aud = []string{"https://other.example.com"} }, Key{}, "aud"},
		{"no exp", func(c *claims) { c.noExp = true }, Key{}, "exp is required"},
		{"expired", func(c *claims) { c.exp = now.Add(-2 * time.Minute) }, Key{}, "expired"},
		{"no iat", func(c *claims) { c.noIat = true }, Key{}, "iat is required"},
		{"iat in the future", func(c *claims) { c.iat = now.Add(5 * time.Minute) }, Key{}, "future"},
		{"iat too old", func(c *claims) { c.iat = now.Add(-2 * time.Hour) }, Key{}, "older"},
		{"lifetime too long", func(c *claims) { c.exp = now.Add(24 * time.Hour) }, Key{}, "exp − iat"},
		{"no jti", func(c *claims) { c.jti = "" }, Key{}, "jti is required"},
		{"not yet valid", func(c *claims) { c.nbf = now.Add(10 * time.Minute) }, Key{}, "not valid before"},
		{"key expired", func(*claims) {}, Key{ExpiresAt: &expired}, "expired"},
		// Each rule at its bound (MaxAge 1h, skew 1 minute): the last
		// accepted and the first refused value.
		{"exp within the skew", func(c *claims) { c.exp = now.Add(-59 * time.Second) }, Key{}, ""},
		{"exp a skew ago", func(c *claims) { c.exp = now.Add(-time.Minute) }, Key{}, "expired"},
		{"iat exactly MaxAge old", func(c *claims) { c.iat, c.exp = now.Add(-time.Hour), now }, Key{}, ""},
		{"iat a second past MaxAge", func(c *claims) { c.iat, c.exp = now.Add(-time.Hour-time.Second), now }, Key{}, "older"},
		{"iat a skew ahead", func(c *claims) { c.iat = now.Add(time.Minute) }, Key{}, ""},
		{"iat past the skew ahead", func(c *claims) { c.iat = now.Add(time.Minute + time.Second) }, Key{}, "future"},
		{"lifetime exactly MaxAge", func(c *claims) { c.iat, c.exp = now.Add(-time.Minute), now.Add(time.Hour-time.Minute) }, Key{}, ""},
		{"lifetime a second over MaxAge", func(c *claims) { c.iat, c.exp = now.Add(-time.Minute), now.Add(time.Hour-time.Minute+time.Second) }, Key{}, "exp − iat"},
		{"nbf a skew ahead", func(c *claims) { c.nbf = now.Add(time.Minute) }, Key{}, ""},
		{"nbf past the skew ahead", func(c *claims) { c.nbf = now.Add(time.Minute + time.Second) }, Key{}, "not valid before"},
		{"nbf in the past", func(c *claims) { c.nbf = now.Add(-time.Minute) }, Key{}, ""},
		{"key expiring now", func(*claims) {}, Key{ExpiresAt: &expiresNow}, "expired"},
		{"key expiring later", func(*claims) {}, Key{ExpiresAt: &expiresLater}, ""},
		{"audience: the token endpoint", func(c *claims) { c.aud = []string{iss + "/oauth/v2/token"} }, Key{}, ""},
		{"audience: one of several", func(c *claims) { c.aud = []string{"https://other.example.com", iss} }, Key{}, ""},
		{"no iss", func(c *claims) { c.iss = "" }, Key{}, "do not name"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			v := &Verifier{Audiences: []string{iss, iss + "/oauth/v2/token"}, Replay: &memReplay{seen: map[string]bool{}}, Now: func() time.Time { return now }}
			c := good()
			tc.edit(&c)
			key := tc.key
			key.ID, key.PEM = "k1", pubPEM
			_, err := v.Verify(context.Background(), sign(c), key, "u1")
			if tc.reason == "" {
				if err != nil {
					t.Fatalf("valid assertion refused: %v", err)
				}
				return
			}
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.reason) {
				t.Fatalf("err = %v; want ErrInvalid with %q", err, tc.reason)
			}
		})
	}
	t.Run("replay", func(t *testing.T) {
		v := &Verifier{Audiences: []string{iss}, Replay: &memReplay{seen: map[string]bool{}}, Now: func() time.Time { return now }}
		raw := sign(good())
		key := Key{ID: "k1", PEM: pubPEM}
		if _, err := v.Verify(context.Background(), raw, key, "u1"); err != nil {
			t.Fatal(err)
		}
		if _, err := v.Verify(context.Background(), raw, key, "u1"); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "replayed") {
			t.Fatalf("second use: %v; want replayed", err)
		}
	})
}

// TestVerifyKeysAndAlgorithms: RS256, ES256 (P-256) and EdDSA keys verify
// their own assertions; a token under another algorithm than the
// registered key's — HS256 keyed with the public key's PEM (the classic
// confusion), none, or a key of another type — is refused, as is a key
// of an unsupported curve.
func TestVerifyKeysAndAlgorithms(t *testing.T) {
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	const iss = "https://id.example.com"
	rsaKey, _ := rsa.GenerateKey(rand.Reader, 2048)
	ecKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	p384, _ := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	_, edKey, _ := ed25519.GenerateKey(rand.Reader)
	pemOf := func(pub any) string {
		der, err := x509.MarshalPKIXPublicKey(pub)
		if err != nil {
			t.Fatal(err)
		}
		return string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}))
	}
	payload := func(aud string) []byte {
		return []byte(`{"iss":"u1","sub":"u1","aud":` + aud + `,"jti":"j","iat":` + strconv.FormatInt(now.Unix()-60, 10) +
			`,"exp":` + strconv.FormatInt(now.Unix()+300, 10) + `}`)
	}
	sign := func(alg jwa.SignatureAlgorithm, key any, p []byte) string {
		h := jws.NewHeaders()
		_ = h.Set(jws.KeyIDKey, "k1")
		raw, err := jws.Sign(p, jws.WithKey(alg, key, jws.WithProtectedHeaders(h)))
		if err != nil {
			t.Fatal(err)
		}
		return string(raw)
	}
	b64 := base64.RawURLEncoding.EncodeToString
	unsigned := b64([]byte(`{"alg":"none","kid":"k1"}`)) + "." + b64(payload(`"`+iss+`"`)) + "."
	cases := []struct {
		name, pem, raw string
		ok             bool
	}{
		{"RS256", pemOf(&rsaKey.PublicKey), sign(jwa.RS256(), rsaKey, payload(`["`+iss+`"]`)), true},
		{"ES256", pemOf(&ecKey.PublicKey), sign(jwa.ES256(), ecKey, payload(`["`+iss+`"]`)), true},
		{"EdDSA", pemOf(edKey.Public()), sign(jwa.EdDSA(), edKey, payload(`["`+iss+`"]`)), true},
		{"aud as a string", pemOf(&ecKey.PublicKey), sign(jwa.ES256(), ecKey, payload(`"`+iss+`"`)), true},
		{"HS256 keyed with the PEM", pemOf(&rsaKey.PublicKey), sign(jwa.HS256(), []byte(pemOf(&rsaKey.PublicKey)), payload(`"`+iss+`"`)), false},
		{"alg none", pemOf(&ecKey.PublicKey), unsigned, false},
		{"ES256 token, RSA key", pemOf(&rsaKey.PublicKey), sign(jwa.ES256(), ecKey, payload(`"`+iss+`"`)), false},
		{"PS256 with the RSA key", pemOf(&rsaKey.PublicKey), sign(jwa.PS256(), rsaKey, payload(`"`+iss+`"`)), false},
		{"P-384 key", pemOf(&p384.PublicKey), sign(jwa.ES384(), p384, payload(`"`+iss+`"`)), false},
		{"not a PEM", "garbage", sign(jwa.ES256(), ecKey, payload(`"`+iss+`"`)), false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			v := &Verifier{Audiences: []string{iss}, Replay: &memReplay{seen: map[string]bool{}}, Now: func() time.Time { return now }}
			_, err := v.Verify(context.Background(), tc.raw, Key{ID: "k1", PEM: tc.pem}, "u1")
			if tc.ok && err != nil {
				t.Fatalf("refused: %v", err)
			}
			if !tc.ok && !errors.Is(err, ErrInvalid) {
				t.Fatalf("got %v; want ErrInvalid", err)
			}
		})
	}
}

// TestVerifyMaxAge: a Verifier's own MaxAge bounds iat's age and the
// lifetime, and the replay memory lasts until exp plus the skew.
func TestVerifyMaxAge(t *testing.T) {
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	der, _ := x509.MarshalPKIXPublicKey(&key.PublicKey)
	k := Key{ID: "k1", PEM: string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}))}
	sign := func(iat, exp time.Time) string {
		tok, err := jwt.NewBuilder().Issuer("u1").Subject("u1").Audience([]string{"aud"}).JwtID("j").IssuedAt(iat).Expiration(exp).Build()
		if err != nil {
			t.Fatal(err)
		}
		h := jws.NewHeaders()
		_ = h.Set(jws.KeyIDKey, "k1")
		raw, err := jwt.Sign(tok, jwt.WithKey(jwa.ES256(), key, jws.WithProtectedHeaders(h)))
		if err != nil {
			t.Fatal(err)
		}
		return string(raw)
	}
	rec := &recordingReplay{}
	v := &Verifier{Audiences: []string{"aud"}, Replay: rec, MaxAge: 5 * time.Minute, Skew: 10 * time.Second, Now: func() time.Time { return now }}
	if _, err := v.Verify(context.Background(), sign(now.Add(-6*time.Minute), now.Add(time.Minute)), k, "u1"); err == nil || !strings.Contains(err.Error(), "older") {
		t.Fatalf("iat 6 minutes old with MaxAge 5m: got %v; want older", err)
	}
	if _, err := v.Verify(context.Background(), sign(now, now.Add(6*time.Minute)), k, "u1"); err == nil || !strings.Contains(err.Error(), "exp − iat") {
		t.Fatalf("lifetime 6m with MaxAge 5m: got %v; want exp − iat", err)
	}
	exp := now.Add(4 * time.Minute)
	if _, err := v.Verify(context.Background(), sign(now.Add(-time.Minute), exp), k, "u1"); err != nil {
		t.Fatal(err)
	}
	if want := exp.Add(10 * time.Second); !rec.until.Equal(want) || rec.issuer != "u1" || rec.jti != "j" {
		t.Fatalf("replay remembered (%q, %q) until %v; want (u1, j) until %v", rec.issuer, rec.jti, rec.until, want)
	}
}

type recordingReplay struct {
	issuer, jti string
	until       time.Time
}

func (r *recordingReplay) Use(_ context.Context, issuer, jti string, exp time.Time) error {
	r.issuer, r.jti, r.until = issuer, jti, exp
	return nil
}
