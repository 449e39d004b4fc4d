package assertion

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
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
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			v := &Verifier{Audiences: []string{iss}, Replay: &memReplay{seen: map[string]bool{}}, Now: func() time.Time { return now }}
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
