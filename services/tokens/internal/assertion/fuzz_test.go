package assertion

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/lestrrat-go/jwx/v3/jwa"
	"github.com/lestrrat-go/jwx/v3/jws"
)

// fuzzNow is the fuzz targets' clock, on a whole second.
var fuzzNow = time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)

const (
	fuzzAudience = "https://id.example.com"
	fuzzSubject  = "u1"
)

// fuzzKey is an ES256 key pair registered as kid "k1" (ES256 signs in
// microseconds, so the fuzzer can sign what it generates).
func fuzzKey(f *testing.F) (*ecdsa.PrivateKey, Key) {
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		f.Fatal(err)
	}
	der, err := x509.MarshalPKIXPublicKey(&priv.PublicKey)
	if err != nil {
		f.Fatal(err)
	}
	return priv, Key{ID: "k1", PEM: string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}))}
}

func fuzzVerifier() *Verifier {
	return &Verifier{Audiences: []string{fuzzAudience}, Replay: &memReplay{seen: map[string]bool{}}, Now: func() time.Time { return fuzzNow }}
}

// FuzzParse: KeyID and Verify never panic on any input and refuse it
// with ErrInvalid (the fuzzer cannot sign with the registered key); a kid
// is found only in a compact JWS, whose header names it.
func FuzzParse(f *testing.F) {
	priv, key := fuzzKey(f)
	valid := signClaims(f, priv, []byte(`{"iss":"u1","sub":"u1","aud":"`+fuzzAudience+`","exp":1795608300,"iat":1795608000,"jti":"j"}`))
	for _, s := range []string{
		valid,
		valid[:strings.LastIndexByte(valid, '.')+1],
		"eyJhbGciOiJub25lIiwia2lkIjoiazEifQ.e30.",
		"eyJhbGciOiJFUzI1NiJ9.e30.AA",
		`{"payload":"e30","signatures":[{"protected":"eyJhbGciOiJFUzI1NiIsImtpZCI6ImsxIn0","signature":"AA"}]}`,
		"..",
		"",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		kid, err := KeyID(raw)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("KeyID: %v; want ErrInvalid", err)
			}
		} else {
			if kid == "" || strings.Count(raw, ".") != 2 {
				t.Fatalf("KeyID(%q) = %q; want a kid only from a compact JWS", raw, kid)
			}
			// Where the decoders differ (invalid UTF-8 in the kid, which
			// KeyID's JSON decoder replaces), the kid names a key nobody
			// has: compare only what both read.
			if h := compactHeader(raw); utf8.ValidString(kid) && !strings.ContainsRune(kid, utf8.RuneError) && (h == nil || h["kid"] != kid) {
				t.Fatalf("KeyID(%q) = %q; the header says %v", raw, kid, h)
			}
		}
		if raw == valid {
			return
		}
		if c, err := fuzzVerifier().Verify(context.Background(), raw, key, fuzzSubject); err == nil || !errors.Is(err, ErrInvalid) {
			t.Fatalf("Verify(%q) = %+v, %v; want ErrInvalid", raw, c, err)
		}
	})
}

// compactHeader decodes the protected header of a compact JWS, nil when
// it is not a JSON object.
func compactHeader(raw string) map[string]any {
	h64, _, _ := strings.Cut(raw, ".")
	b, err := base64.RawURLEncoding.DecodeString(h64)
	if err != nil {
		return nil
	}
	var m map[string]any
	if json.Unmarshal(b, &m) != nil {
		return nil
	}
	return m
}

// FuzzVerifyClaims: for any payload signed with the registered key,
// Verify's decision is that of an independent reading of the rules
// (RFC 7523 §3 and the package's: iss = sub = the subject, aud naming us,
// exp not past, iat present, neither in the future nor older than MaxAge,
// exp − iat at most MaxAge, nbf not in the future, a jti), whenever the
// payload is plain: one JSON object with no repeated member and the
// time claims integers of plausible size. For any other payload Verify
// only has to answer without panicking; what it accepts still satisfies
// the rules as the returned claims state them.
func FuzzVerifyClaims(f *testing.F) {
	priv, key := fuzzKey(f)
	now := fuzzNow.Unix()
	seed := func(extra string) {
		f.Add(`{"iss":"u1","sub":"u1","aud":["` + fuzzAudience + `"],"exp":` + itoa(now+300) + `,"iat":` + itoa(now-60) + `,"jti":"j"` + extra + `}`)
	}
	seed("")
	seed(`,"nbf":` + itoa(now+61))
	seed(`,"nbf":` + itoa(now+60))
	seed(`,"exp":` + itoa(now-60))
	seed(`,"exp":` + itoa(now-59))
	seed(`,"iat":` + itoa(now-3600))
	seed(`,"iat":` + itoa(now-3601))
	seed(`,"iat":` + itoa(now+61))
	seed(`,"aud":"` + fuzzAudience + `"`)
	seed(`,"aud":["a",5]`)
	seed(`,"exp":"` + itoa(now+300) + `"`)
	seed(`,"jti":""`)
	seed(`,"iss":"u2"`)
	f.Add(`[]`)
	f.Add(`{"iss":"u1"} trailing`)
	f.Fuzz(func(t *testing.T, payload string) {
		raw := signClaims(t, priv, []byte(payload))
		c, err := fuzzVerifier().Verify(context.Background(), raw, key, fuzzSubject)
		if err != nil && !errors.Is(err, ErrInvalid) {
			t.Fatalf("Verify: %v; want nil or ErrInvalid", err)
		}
		if err == nil {
			checkClaims(t, c)
		}
		want, plain := oracle(payload)
		if plain && want != (err == nil) {
			t.Fatalf("payload %s: Verify says %v; the rules say accepted=%v", payload, err, want)
		}
	})
}

// checkClaims: accepted claims satisfy every rule as Verify returns them.
func checkClaims(t *testing.T, c *Claims) {
	t.Helper()
	skew, maxAge := time.Minute, time.Hour
	switch {
	case c.Issuer != fuzzSubject || c.Subject != fuzzSubject:
		t.Fatalf("accepted iss %q sub %q", c.Issuer, c.Subject)
	case !slices.Contains(c.Audience, fuzzAudience):
		t.Fatalf("accepted aud %v", c.Audience)
	case c.JTI == "":
		t.Fatalf("accepted without jti")
	case !fuzzNow.Before(c.Expiry.Add(skew)):
		t.Fatalf("accepted exp %v", c.Expiry)
	case c.IssuedAt.After(fuzzNow.Add(skew)) || fuzzNow.Sub(c.IssuedAt) > maxAge || c.Expiry.Sub(c.IssuedAt) > maxAge:
		t.Fatalf("accepted iat %v exp %v", c.IssuedAt, c.Expiry)
	}
}

// oracle reads payload by the rules with encoding/json; plain is false
// when the payload is outside what it judges (see FuzzVerifyClaims).
func oracle(payload string) (accept, plain bool) {
	if !oneObjectNoRepeats([]byte(payload)) {
		return false, false
	}
	var m map[string]json.RawMessage
	if json.Unmarshal([]byte(payload), &m) != nil {
		return false, false
	}
	dates := map[string]int64{}
	for _, name := range []string{"exp", "iat", "nbf"} {
		raw, ok := m[name]
		if !ok {
			continue
		}
		var x float64
		// Only integers well inside time.Time's and jwx's ranges.
		if json.Unmarshal(raw, &x) != nil || x != math.Trunc(x) || math.Abs(x) > 1<<40 || bytes.ContainsAny(raw, "eE.") {
			return false, false
		}
		dates[name] = int64(x)
	}
	str := func(name string) (string, bool) {
		var s string
		raw, ok := m[name]
		if !ok || json.Unmarshal(raw, &s) != nil {
			return "", false
		}
		return s, true
	}
	iss, _ := str("iss")
	sub, _ := str("sub")
	jti, _ := str("jti")
	var aud []string
	if raw, ok := m["aud"]; ok {
		var one string
		if json.Unmarshal(raw, &one) == nil {
			aud = []string{one}
		} else if json.Unmarshal(raw, &aud) != nil {
			aud = nil
		}
	}
	now := fuzzNow.Unix()
	const skew, maxAge = 60, 3600
	exp, hasExp := dates["exp"]
	iat, hasIat := dates["iat"]
	nbf, hasNbf := dates["nbf"]
	accept = iss == fuzzSubject && sub == fuzzSubject && slices.Contains(aud, fuzzAudience) && jti != "" &&
		hasExp && now < exp+skew &&
		hasIat && iat <= now+skew && now-iat <= maxAge && exp-iat <= maxAge &&
		(!hasNbf || nbf <= now+skew)
	return accept, true
}

// oneObjectNoRepeats reports whether b is exactly one JSON object whose
// members (at the top level) all have distinct names.
func oneObjectNoRepeats(b []byte) bool {
	d := json.NewDecoder(bytes.NewReader(b))
	if tok, err := d.Token(); err != nil || tok != json.Delim('{') {
		return false
	}
	seen := map[string]bool{}
	for d.More() {
		tok, err := d.Token()
		name, ok := tok.(string)
		if err != nil || !ok || seen[name] {
			return false
		}
		seen[name] = true
		var v json.RawMessage
		if d.Decode(&v) != nil {
			return false
		}
	}
	if tok, err := d.Token(); err != nil || tok != json.Delim('}') {
		return false
	}
	_, err := d.Token()
	return err != nil // nothing after the object
}

func signClaims(t testing.TB, priv *ecdsa.PrivateKey, payload []byte) string {
	t.Helper()
	h := jws.NewHeaders()
	if err := h.Set(jws.KeyIDKey, "k1"); err != nil {
		t.Fatal(err)
	}
	raw, err := jws.Sign(payload, jws.WithKey(jwa.ES256(), priv, jws.WithProtectedHeaders(h)))
	if err != nil {
		t.Fatal(err)
	}
	return string(raw)
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
