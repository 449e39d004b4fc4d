package keys_test

import (
	"bytes"
	"context"
	"crypto"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/lestrrat-go/jwx/v3/jwa"
	"github.com/lestrrat-go/jwx/v3/jwk"
	"github.com/lestrrat-go/jwx/v3/jws"

	"github.com/gatehouse-id/gatehouse/pkg/db"
	"github.com/gatehouse-id/gatehouse/pkg/secrets"
	"github.com/gatehouse-id/gatehouse/services/tokens/internal/keys"
	"github.com/gatehouse-id/gatehouse/services/tokens/internal/keys/keytest"
	"github.com/gatehouse-id/gatehouse/services/tokens/internal/ossltest"
	"github.com/gatehouse-id/gatehouse/services/tokens/ossl"
)

func jwaOf(alg string) jwa.SignatureAlgorithm {
	a, ok := jwa.LookupSignatureAlgorithm(alg)
	if !ok {
		panic("unknown algorithm " + alg)
	}
	return a
}

// publishedSet is the key set as a relying party parses it from JSON.
func publishedSet(t testing.TB, m *keys.Manager) jwk.Set {
	t.Helper()
	var raw []json.RawMessage
	for _, k := range m.PublicKeys().Keys {
		b, err := json.Marshal(k.JWK)
		if err != nil {
			t.Fatal(err)
		}
		raw = append(raw, b)
	}
	doc, _ := json.Marshal(map[string]any{"keys": raw})
	set, err := jwk.Parse(doc)
	if err != nil {
		t.Fatalf("parse published key set: %v", err)
	}
	return set
}

// TestSignInteroperates: tokens from Sign verify with jwx against the
// published JWK, for every algorithm, and carry the expected header.
// Both signing libraries are checked: OpenSSL where it loads (always
// under CI=true), the standard library everywhere.
func TestSignInteroperates(t *testing.T) {
	for _, lib := range []string{keys.LibraryGo, keys.LibraryOpenSSL} {
		for _, alg := range keys.Algorithms {
			t.Run(lib+"/"+alg, func(t *testing.T) {
				if lib == keys.LibraryOpenSSL {
					ossltest.Require(t)
				}
				testSignInteroperates(t, lib, alg)
			})
		}
	}
}

func testSignInteroperates(t *testing.T, lib, alg string) {
	store := keytest.Open(t, keytest.DBOptions(t, db.SQLite))
	o := keytest.Options(alg, nil)
	o.Library = lib
	m := keytest.Manager(t, store, o)
	s, err := m.Signer()
	if err != nil {
		t.Fatal(err)
	}
	if want := map[bool]string{true: lib, false: keys.LibraryGo}[alg != keys.EdDSA]; s.Library != want {
		t.Fatalf("signer library: got %q; want %q", s.Library, want)
	}
	claims := []byte(`{"iss":"https://id.example.com","sub":"42","aud":["app"],"exp":1900000000}`)
	tok, err := m.Sign(claims)
	if err != nil {
		t.Fatal(err)
	}
	set := publishedSet(t, m)
	k, ok := set.LookupKeyID(s.KeyID)
	if !ok {
		t.Fatalf("published set lacks kid %s", s.KeyID)
	}
	if use, _ := k.KeyUsage(); use != "sig" {
		t.Fatalf("use: got %q; want sig", use)
	}
	if a, _ := k.Algorithm(); a.String() != alg {
		t.Fatalf("alg: got %v; want %s", a, alg)
	}
	payload, err := jws.Verify([]byte(tok), jws.WithKeySet(set, jws.WithRequireKid(true)))
	if err != nil {
		t.Fatalf("jwx verify: %v", err)
	}
	if !bytes.Equal(payload, claims) {
		t.Fatalf("payload: got %s; want %s", payload, claims)
	}
	msg, err := jws.Parse([]byte(tok))
	if err != nil {
		t.Fatal(err)
	}
	h := msg.Signatures()[0].ProtectedHeaders()
	kid, _ := h.KeyID()
	typ, _ := h.Type()
	halg, _ := h.Algorithm()
	if kid != s.KeyID || typ != "JWT" || halg.String() != alg {
		t.Fatalf("header: kid %q typ %q alg %v; want %s JWT %s", kid, typ, halg, s.KeyID, alg)
	}
	// An access token says so in its header (RFC 9068 §2.1), signed alike.
	at, err := m.SignAccessToken(claims)
	if err != nil {
		t.Fatal(err)
	}
	if payload, err := jws.Verify([]byte(at), jws.WithKeySet(set, jws.WithRequireKid(true))); err != nil || !bytes.Equal(payload, claims) {
		t.Fatalf("jwx verify of the access token: %s, %v", payload, err)
	}
	atMsg, err := jws.Parse([]byte(at))
	if err != nil {
		t.Fatal(err)
	}
	if typ, _ := atMsg.Signatures()[0].ProtectedHeaders().Type(); typ != keys.TypeAccessToken {
		t.Fatalf("access token typ %q; want %s", typ, keys.TypeAccessToken)
	}
	// So does a back-channel logout token (Back-Channel Logout 1.0 §2.4).
	lt, err := m.SignLogoutToken(claims)
	if err != nil {
		t.Fatal(err)
	}
	if payload, err := jws.Verify([]byte(lt), jws.WithKeySet(set, jws.WithRequireKid(true))); err != nil || !bytes.Equal(payload, claims) {
		t.Fatalf("jwx verify of the logout token: %s, %v", payload, err)
	}
	ltMsg, err := jws.Parse([]byte(lt))
	if err != nil {
		t.Fatal(err)
	}
	lh := ltMsg.Signatures()[0].ProtectedHeaders()
	if typ, _ := lh.Type(); typ != keys.TypeLogoutToken {
		t.Fatalf("logout token typ %q; want %s", typ, keys.TypeLogoutToken)
	}
	if kid, _ := lh.KeyID(); kid != s.KeyID {
		t.Fatalf("logout token kid %q; want %s", kid, s.KeyID)
	}
	pub, ok := m.PublicKey(s.KeyID)
	if eq, _ := pub.(interface{ Equal(crypto.PublicKey) bool }); !ok || eq == nil || !eq.Equal(s.Key.Public()) {
		t.Fatalf("PublicKey(%s): got %T, %v; want the signer's public key", s.KeyID, pub, ok)
	}
	if _, ok := m.PublicKey("unknown"); ok {
		t.Fatalf("PublicKey of an unknown kid found")
	}
	// Our own verifier agrees.
	got, err := m.Verify(tok)
	if err != nil || !bytes.Equal(got, claims) {
		t.Fatalf("Verify: got %s, %v; want the claims", got, err)
	}
}

// TestLibraryChoice: auto takes OpenSSL where it loads, openssl refuses to
// start without it, go never uses it, and anything else is refused.
func TestLibraryChoice(t *testing.T) {
	_, loadErr := ossl.Load()
	for _, c := range []struct {
		lib  string
		want string // signer library; "" when New must fail
	}{
		{keys.LibraryGo, keys.LibraryGo},
		{keys.LibraryAuto, map[bool]string{true: keys.LibraryOpenSSL, false: keys.LibraryGo}[loadErr == nil]},
		{keys.LibraryOpenSSL, map[bool]string{true: keys.LibraryOpenSSL, false: ""}[loadErr == nil]},
		{"boringssl", ""},
	} {
		t.Run(c.lib, func(t *testing.T) {
			o := keytest.Options(keys.RS256, nil)
			o.Library = c.lib
			m, err := keys.New(context.Background(), keytest.Open(t, keytest.DBOptions(t, db.SQLite)), o)
			if c.want == "" {
				if err == nil {
					m.Stop()
					t.Fatal("New succeeded; want an error")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer m.Stop()
			s, err := m.Signer()
			if err != nil {
				t.Fatal(err)
			}
			if s.Library != c.want {
				t.Fatalf("signer library: got %q; want %q", s.Library, c.want)
			}
		})
	}
}

// TestVerify: Verify accepts tokens jwx signs with our keys and refuses
// every kind of forgery.
func TestVerify(t *testing.T) {
	for _, alg := range keys.Algorithms {
		t.Run(alg, func(t *testing.T) {
			store := keytest.Open(t, keytest.DBOptions(t, db.SQLite))
			m := keytest.Manager(t, store, keytest.Options(alg, nil))
			s, err := m.Signer()
			if err != nil {
				t.Fatal(err)
			}
			sign := func(t *testing.T, key any, a jwa.SignatureAlgorithm, hdr map[string]any, payload string) string {
				t.Helper()
				h := jws.NewHeaders()
				for k, v := range hdr {
					if err := h.Set(k, v); err != nil {
						t.Fatal(err)
					}
				}
				b, err := jws.Sign([]byte(payload), jws.WithKey(a, key, jws.WithProtectedHeaders(h)))
				if err != nil {
					t.Fatal(err)
				}
				return string(b)
			}
			good := sign(t, s.Key, jwaOf(alg), map[string]any{"kid": s.KeyID}, `{"sub":"1"}`)
			if p, err := m.Verify(good); err != nil || string(p) != `{"sub":"1"}` {
				t.Fatalf("jwx-signed token: got %s, %v", p, err)
			}

			tok, err := m.Sign([]byte(`{"sub":"1"}`))
			if err != nil {
				t.Fatal(err)
			}
			parts := strings.Split(tok, ".")
			b64 := base64.RawURLEncoding.EncodeToString
			other := keytest.Manager(t, keytest.Open(t, keytest.DBOptions(t, db.SQLite)), keytest.Options(alg, nil))
			os, err := other.Signer()
			if err != nil {
				t.Fatal(err)
			}
			otherAlg := keys.ES256
			if alg == keys.ES256 {
				otherAlg = keys.EdDSA
			}
			cases := map[string]string{
				"tampered payload":    parts[0] + "." + b64([]byte(`{"sub":"2"}`)) + "." + parts[2],
				"tampered signature":  parts[0] + "." + parts[1] + "." + b64(append([]byte{1}, make([]byte, 63)...)),
				"no signature":        parts[0] + "." + parts[1] + ".",
				"two parts":           parts[0] + "." + parts[1],
				"four parts":          tok + ".x",
				"padded signature":    tok + "=",
				"line break in sig":   parts[0] + "." + parts[1] + "." + parts[2][:10] + "\n" + parts[2][10:],
				"CRLF at the end":     tok + "\r\n",
				"space in signature":  parts[0] + "." + parts[1] + "." + parts[2][:10] + " " + parts[2][10:],
				"alg none":            b64([]byte(`{"alg":"none","kid":"`+s.KeyID+`"}`)) + "." + parts[1] + ".",
				"alg of another kind": b64([]byte(`{"alg":"`+otherAlg+`","kid":"`+s.KeyID+`"}`)) + "." + parts[1] + "." + parts[2],
				"HS256 with key":      b64([]byte(`{"alg":"HS256","kid":"`+s.KeyID+`"}`)) + "." + parts[1] + "." + parts[2],
				"unknown kid":         sign(t, os.Key, jwaOf(alg), map[string]any{"kid": os.KeyID}, `{"sub":"1"}`),
				"foreign key our kid": sign(t, os.Key, jwaOf(alg), map[string]any{"kid": s.KeyID}, `{"sub":"1"}`),
				"no kid":              sign(t, s.Key, jwaOf(alg), nil, `{"sub":"1"}`),
				"crit header":         sign(t, s.Key, jwaOf(alg), map[string]any{"kid": s.KeyID, "crit": []string{"exp"}, "exp": 1}, `{"sub":"1"}`),
				"jku header":          sign(t, s.Key, jwaOf(alg), map[string]any{"kid": s.KeyID, "jku": "https://evil.example/keys"}, `{"sub":"1"}`),
				"header not JSON":     b64([]byte(`not json`)) + "." + parts[1] + "." + parts[2],
				"empty":               "",
			}
			for name, tok := range cases {
				if _, err := m.Verify(tok); !errors.Is(err, keys.ErrInvalidToken) {
					t.Errorf("%s: got %v; want ErrInvalidToken", name, err)
				}
			}
		})
	}
}

// assertEncrypted checks that the stored private key of s is ciphertext
// that opens only with the key id as additional data.
func assertEncrypted(t *testing.T, store *db.DB, s *keys.Signer) {
	t.Helper()
	der, err := x509.MarshalPKCS8PrivateKey(s.Key)
	if err != nil {
		t.Fatal(err)
	}
	var stored []byte
	if err := store.Get(context.Background(), &stored, `SELECT private_key FROM signing_keys WHERE id = ?`, s.KeyID); err != nil {
		t.Fatal(err)
	}
	for i := 0; i+16 <= len(der); i += 16 {
		if bytes.Contains(stored, der[i:i+16]) {
			t.Fatalf("stored private key contains plaintext key material")
		}
	}
	c, err := secrets.NewCipher(keytest.MasterKey, secrets.PurposeSigningKeys)
	if err != nil {
		t.Fatal(err)
	}
	plain, err := c.Decrypt(stored, []byte(s.KeyID))
	if err != nil || !bytes.Equal(plain, der) {
		t.Fatalf("decrypt with the key id: %v (equal %v)", err, bytes.Equal(plain, der))
	}
	if _, err := c.Decrypt(stored, []byte(s.KeyID+"x")); !errors.Is(err, secrets.ErrDecrypt) {
		t.Fatalf("decrypt with another key id: got %v; want ErrDecrypt", err)
	}
}
