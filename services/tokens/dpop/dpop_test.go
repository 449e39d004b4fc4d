package dpop_test

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/gatehouse-id/gatehouse/services/tokens/dpop"
)

var now = time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)

type memReplay struct {
	mu   sync.Mutex
	seen map[string]bool
}

func (m *memReplay) Use(_ context.Context, jkt, jti string, _ time.Time) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.seen[jkt+" "+jti] {
		return dpop.ErrReplayed
	}
	m.seen[jkt+" "+jti] = true
	return nil
}

func verifier() *dpop.Verifier {
	return &dpop.Verifier{Replay: &memReplay{seen: map[string]bool{}}, Now: func() time.Time { return now }}
}

// proof signs claims with key under alg, the public key in the header;
// edit changes the header before signing.
func proof(t *testing.T, key crypto.Signer, alg jose.SignatureAlgorithm, claims map[string]any, header map[jose.HeaderKey]any) string {
	t.Helper()
	opts := (&jose.SignerOptions{EmbedJWK: true}).WithType("dpop+jwt")
	for k, v := range header {
		opts = opts.WithHeader(k, v)
	}
	s, err := jose.NewSigner(jose.SigningKey{Algorithm: alg, Key: key}, opts)
	if err != nil {
		t.Fatal(err)
	}
	payload, _ := json.Marshal(claims)
	obj, err := s.Sign(payload)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := obj.CompactSerialize()
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

func claims(edit map[string]any) map[string]any {
	c := map[string]any{"jti": "j-" + base64.RawURLEncoding.EncodeToString([]byte(time.Now().String())), "htm": "POST",
		"htu": "https://id.example.com/oauth/v2/token", "iat": now.Unix()}
	for k, v := range edit {
		if v == nil {
			delete(c, k)
		} else {
			c[k] = v
		}
	}
	return c
}

var tokenRequest = dpop.Request{Method: "POST", URL: "https://id.example.com/oauth/v2/token"}

// TestVerifyAlgorithms: ES256, RS256, PS256 and EdDSA proofs verify, and
// the thumbprint is the key's RFC 7638 one.
func TestVerifyAlgorithms(t *testing.T) {
	t.Parallel()
	ec, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	rs, _ := rsa.GenerateKey(rand.Reader, 2048)
	_, ed, _ := ed25519.GenerateKey(rand.Reader)
	for _, tc := range []struct {
		alg jose.SignatureAlgorithm
		key crypto.Signer
	}{{jose.ES256, ec}, {jose.RS256, rs}, {jose.PS256, rs}, {jose.EdDSA, ed}} {
		p, err := verifier().Verify(context.Background(), proof(t, tc.key, tc.alg, claims(nil), nil), tokenRequest)
		if err != nil {
			t.Fatalf("%s: %v", tc.alg, err)
		}
		tp, _ := (&jose.JSONWebKey{Key: tc.key.Public()}).Thumbprint(crypto.SHA256)
		if p.JKT != base64.RawURLEncoding.EncodeToString(tp) {
			t.Errorf("%s: jkt %s", tc.alg, p.JKT)
		}
	}
}

// TestVerifyRules: each rule broken alone is refused.
func TestVerifyRules(t *testing.T) {
	t.Parallel()
	ec, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	other, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	short, _ := rsa.GenerateKey(rand.Reader, 1024)
	p384, _ := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	ctx := context.Background()
	good := proof(t, ec, jose.ES256, claims(nil), nil)

	resource := dpop.Request{Method: "GET", URL: "https://id.example.com/oidc/v1/userinfo", AccessToken: "at-1"}
	for _, tc := range []struct {
		name string
		raw  string
		req  dpop.Request
	}{
		{"wrong htm", proof(t, ec, jose.ES256, claims(map[string]any{"htm": "GET"}), nil), tokenRequest},
		{"wrong htu", proof(t, ec, jose.ES256, claims(map[string]any{"htu": "https://id.example.com/oauth/v2/revoke"}), nil), tokenRequest},
		{"htu of another host", proof(t, ec, jose.ES256, claims(map[string]any{"htu": "https://evil.example.com/oauth/v2/token"}), nil), tokenRequest},
		{"old iat", proof(t, ec, jose.ES256, claims(map[string]any{"iat": now.Add(-2 * time.Minute).Unix()}), nil), tokenRequest},
		{"future iat", proof(t, ec, jose.ES256, claims(map[string]any{"iat": now.Add(time.Minute).Unix()}), nil), tokenRequest},
		{"no iat", proof(t, ec, jose.ES256, claims(map[string]any{"iat": nil}), nil), tokenRequest},
		{"no jti", proof(t, ec, jose.ES256, claims(map[string]any{"jti": nil}), nil), tokenRequest},
		{"ath at the token endpoint", proof(t, ec, jose.ES256, claims(map[string]any{"ath": dpop.AccessTokenHash("x")}), nil), tokenRequest},
		{"no ath at a resource", proof(t, ec, jose.ES256, claims(map[string]any{"htm": "GET", "htu": resource.URL}), nil), resource},
		{"wrong ath", proof(t, ec, jose.ES256, claims(map[string]any{"htm": "GET", "htu": resource.URL, "ath": dpop.AccessTokenHash("at-2")}), nil), resource},
		{"alg none", unsignedProof(ec), tokenRequest},
		{"symmetric alg", retyped(good, "HS256"), tokenRequest},
		{"alg for another key type", retyped(good, "RS256"), tokenRequest},
		{"another typ", proof(t, ec, jose.ES256, claims(nil), map[jose.HeaderKey]any{"typ": "JWT"}), tokenRequest},
		{"private key in the jwk", withJWK(good, jose.JSONWebKey{Key: ec}), tokenRequest},
		{"signed by another key", withJWK(good, jose.JSONWebKey{Key: other.Public()}), tokenRequest},
		{"short RSA key", proof(t, short, jose.RS256, claims(nil), nil), tokenRequest},
		{"EC key of another curve", withJWK(good, jose.JSONWebKey{Key: p384.Public()}), tokenRequest},
		{"EC point off the curve", withRawJWK(good, map[string]string{"kty": "EC", "crv": "P-256",
			"x": base64.RawURLEncoding.EncodeToString(make([]byte, 32)), "y": base64.RawURLEncoding.EncodeToString(append(make([]byte, 31), 1))}), tokenRequest},
		{"a symmetric jwk", withRawJWK(good, map[string]string{"kty": "oct", "k": "c2VjcmV0"}), tokenRequest},
		{"not a JWS", "abc", tokenRequest},
	} {
		_, err := verifier().Verify(ctx, tc.raw, tc.req)
		if !errors.Is(err, dpop.ErrInvalid) {
			t.Errorf("%s: %v; want invalid", tc.name, err)
		}
	}
	// A resource's proof with the right ath verifies.
	if _, err := verifier().Verify(ctx, proof(t, ec, jose.ES256, claims(map[string]any{"htm": "GET", "htu": resource.URL + "?x=1",
		"ath": dpop.AccessTokenHash("at-1")}), nil), resource); err != nil {
		t.Fatalf("resource proof: %v", err)
	}
	// Nonces: none, a forged one or one two periods old is
	// use_dpop_nonce; the current and the previous period's are good.
	clock := now
	nonces := &dpop.Nonces{Key: []byte("nonce key"), Now: func() time.Time { return clock }}
	withNonces := func() *dpop.Verifier { v := verifier(); v.Nonces = nonces; return v }
	if _, err := withNonces().Verify(ctx, good, tokenRequest); !errors.Is(err, dpop.ErrUseNonce) {
		t.Errorf("no nonce: %v", err)
	}
	forged := (&dpop.Nonces{Key: []byte("another key"), Now: nonces.Now}).Current()
	old := nonces.Current()
	clock = clock.Add(dpop.DefaultNoncePeriod)
	prev := nonces.Current()
	clock = clock.Add(dpop.DefaultNoncePeriod)
	for name, n := range map[string]string{"forged": forged, "two periods old": old, "not base64": "n-1!"} {
		if _, err := withNonces().Verify(ctx, proof(t, ec, jose.ES256, claims(map[string]any{"nonce": n}), nil), tokenRequest); !errors.Is(err, dpop.ErrUseNonce) {
			t.Errorf("%s nonce: %v", name, err)
		}
	}
	for name, n := range map[string]string{"current": nonces.Current(), "previous": prev} {
		if _, err := withNonces().Verify(ctx, proof(t, ec, jose.ES256, claims(map[string]any{"nonce": n}), nil), tokenRequest); err != nil {
			t.Errorf("%s nonce: %v", name, err)
		}
	}
	// A proof issued before NotAfter (a start after a crash) is refused.
	notAfter := verifier()
	notAfter.NotAfter = now
	if _, err := notAfter.Verify(ctx, good, tokenRequest); !errors.Is(err, dpop.ErrInvalid) {
		t.Errorf("proof issued at NotAfter: %v", err)
	}
	// Replay: the same proof twice.
	v := verifier()
	if _, err := v.Verify(ctx, good, tokenRequest); err != nil {
		t.Fatal(err)
	}
	if _, err := v.Verify(ctx, good, tokenRequest); !errors.Is(err, dpop.ErrInvalid) {
		t.Fatalf("replayed proof: %v", err)
	}
}

// unsignedProof is an alg none proof with key's public jwk.
func unsignedProof(key *ecdsa.PrivateKey) string {
	pub, _ := json.Marshal(jose.JSONWebKey{Key: key.Public()})
	h, _ := json.Marshal(map[string]any{"typ": "dpop+jwt", "alg": "none", "jwk": json.RawMessage(pub)})
	c, _ := json.Marshal(claims(nil))
	return base64.RawURLEncoding.EncodeToString(h) + "." + base64.RawURLEncoding.EncodeToString(c) + "."
}

// retyped changes a proof's alg header (its signature no longer matters).
func retyped(raw, alg string) string {
	parts := strings.Split(raw, ".")
	h, _ := base64.RawURLEncoding.DecodeString(parts[0])
	var m map[string]any
	_ = json.Unmarshal(h, &m)
	m["alg"] = alg
	h, _ = json.Marshal(m)
	return base64.RawURLEncoding.EncodeToString(h) + "." + parts[1] + "." + parts[2]
}

// withJWK puts another key in the header of a signed proof.
func withJWK(raw string, key jose.JSONWebKey) string {
	parts := strings.Split(raw, ".")
	h, _ := base64.RawURLEncoding.DecodeString(parts[0])
	var m map[string]any
	_ = json.Unmarshal(h, &m)
	k, _ := json.Marshal(key)
	m["jwk"] = json.RawMessage(k)
	h, _ = json.Marshal(m)
	return base64.RawURLEncoding.EncodeToString(h) + "." + parts[1] + "." + parts[2]
}

// withRawJWK puts members as the jwk of a signed proof's header.
func withRawJWK(raw string, members map[string]string) string {
	parts := strings.Split(raw, ".")
	h, _ := base64.RawURLEncoding.DecodeString(parts[0])
	var m map[string]any
	_ = json.Unmarshal(h, &m)
	m["jwk"] = members
	h, _ = json.Marshal(m)
	return base64.RawURLEncoding.EncodeToString(h) + "." + parts[1] + "." + parts[2]
}

// FuzzVerify: no input makes Verify panic, and whatever it accepts names
// a key and a jti.
func FuzzVerify(f *testing.F) {
	ec, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	s, _ := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: ec}, (&jose.SignerOptions{EmbedJWK: true}).WithType("dpop+jwt"))
	payload, _ := json.Marshal(claims(nil))
	obj, _ := s.Sign(payload)
	good, _ := obj.CompactSerialize()
	f.Add(good)
	f.Add(unsignedProof(ec))
	f.Add(retyped(good, "HS256"))
	f.Add("a.b.c")
	f.Fuzz(func(t *testing.T, raw string) {
		p, err := verifier().Verify(context.Background(), raw, tokenRequest)
		if err == nil && (p.JKT == "" || p.JTI == "") {
			t.Fatalf("accepted without a key or jti: %+v", p)
		}
	})
}

// BenchmarkVerify is a proof check without its replay store beside the
// ES256 verification alone (crypto/ecdsa), the floor of make bench's
// token-dpop target: their ratio is the check's overhead.
func BenchmarkVerify(b *testing.B) {
	k, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	t := &testing.T{}
	proofs := make([]string, 1024)
	for i := range proofs {
		proofs[i] = proof(t, k, jose.ES256, map[string]any{"jti": strconv.Itoa(i), "htm": "POST", "htu": tokenRequest.URL,
			"iat": time.Now().Unix()}, nil)
	}
	b.Run("proof", func(b *testing.B) {
		v := &dpop.Verifier{}
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			if _, err := v.Verify(context.Background(), proofs[i%len(proofs)], tokenRequest); err != nil {
				b.Fatal(err)
			}
			i++
		}
	})
	b.Run("es256-verify", func(b *testing.B) {
		digest := sha256.Sum256([]byte(proofs[0]))
		sig, _ := ecdsa.SignASN1(rand.Reader, k, digest[:])
		for b.Loop() {
			if !ecdsa.VerifyASN1(&k.PublicKey, digest[:], sig) {
				b.Fatal("no")
			}
		}
	})
}
