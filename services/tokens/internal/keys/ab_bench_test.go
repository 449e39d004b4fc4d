package keys_test

import (
	"testing"

	"github.com/lestrrat-go/jwx/v3/jws"

	"github.com/gatehouse-id/gatehouse/pkg/db"
	"github.com/gatehouse-id/gatehouse/pkg/testutil/benchcpu"
	"github.com/gatehouse-id/gatehouse/services/tokens/internal/keys"
	"github.com/gatehouse-id/gatehouse/services/tokens/internal/keys/keytest"
)

// The A/B benchmarks of make bench-ab (bench/README, "Hand-made
// machinery") for the compact JWS signer and verifier against
// github.com/lestrrat-go/jwx/v3, on benchClaims and the same key. The
// manager signs with the Go standard library (LibraryGo), as jwx does, so
// the pair differs in the JWS code alone; OpenSSL's share is
// BenchmarkABOpenSSL's (package ossl).

// abManager is a manager of one alg key that signs with the standard library.
func abManager(b *testing.B, alg string) *keys.Manager {
	b.Helper()
	o := keytest.Options(alg, nil)
	o.Library = keys.LibraryGo
	return keytest.Manager(b, keytest.Open(b, keytest.DBOptions(b, db.SQLite)), o)
}

// BenchmarkABSign: ab=hand is Manager.Sign (the key picked, the header
// serialized once per key); ab=plain picks the key the same way, then
// jws.Sign builds the compact JWS with {"kid","typ":"JWT"} protected
// headers, as BenchmarkJWX does.
func BenchmarkABSign(b *testing.B) {
	for _, alg := range []string{keys.ES256, keys.RS256} {
		for _, arm := range []string{"hand", "plain"} {
			b.Run(alg+"/ab="+arm, func(b *testing.B) {
				m := abManager(b, alg)
				b.ReportAllocs()
				meter := benchcpu.Start(b)
				for range b.N {
					if arm == "hand" {
						if _, err := m.Sign(benchClaims); err != nil {
							b.Fatal(err)
						}
						continue
					}
					s, err := m.Signer()
					if err != nil {
						b.Fatal(err)
					}
					jwxSign(b, s, alg, benchClaims)
				}
				meter.Report(b)
			})
		}
	}
}

// BenchmarkABVerify: one token of Manager.Sign verified by Manager.Verify
// (ab=hand: header checked, key found by kid, signature verified, payload
// decoded) or by jws.Verify against the published key set parsed as a
// relying party parses it, kid required (ab=plain, as BenchmarkJWX).
func BenchmarkABVerify(b *testing.B) {
	for _, alg := range []string{keys.ES256, keys.RS256} {
		for _, arm := range []string{"hand", "plain"} {
			b.Run(alg+"/ab="+arm, func(b *testing.B) {
				m := abManager(b, alg)
				tok, err := m.Sign(benchClaims)
				if err != nil {
					b.Fatal(err)
				}
				verify := func() ([]byte, error) { return m.Verify(tok) }
				if arm == "plain" {
					set := publishedSet(b, m)
					verify = func() ([]byte, error) {
						return jws.Verify([]byte(tok), jws.WithKeySet(set, jws.WithRequireKid(true)))
					}
				}
				if payload, err := verify(); err != nil || string(payload) != string(benchClaims) {
					b.Fatalf("verify: %q, %v; want the claims", payload, err)
				}
				b.ReportAllocs()
				meter := benchcpu.Start(b)
				for range b.N {
					if _, err := verify(); err != nil {
						b.Fatal(err)
					}
				}
				meter.Report(b)
			})
		}
	}
}
