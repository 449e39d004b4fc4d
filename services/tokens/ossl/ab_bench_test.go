package ossl_test

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"testing"

	"github.com/gatehouse-id/gatehouse/pkg/testutil/benchcpu"
	"github.com/gatehouse-id/gatehouse/services/tokens/internal/ossltest"
	"github.com/gatehouse-id/gatehouse/services/tokens/ossl"
)

// BenchmarkABOpenSSL is make bench-ab's pair (bench/README, "Hand-made
// machinery") for signing with OpenSSL's libcrypto, loaded by dlopen: one
// signature of a SHA-256 digest with the same RSA-2048 or P-256 key, by
// this package's SignFunc (ab=hand: PKCS #1 v1.5, or ECDSA in ASN.1 DER)
// or by crypto/rsa.SignPKCS1v15 and crypto/ecdsa.SignASN1 (ab=plain, the
// same outputs). Skipped where OpenSSL does not load (ossltest.Require:
// a failure under CI=true, as for the package's tests).
func BenchmarkABOpenSSL(b *testing.B) {
	ossltest.Require(b)
	rk, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		b.Fatal(err)
	}
	ek, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		b.Fatal(err)
	}
	d := sha256.Sum256([]byte("benchmark"))
	for _, c := range []struct {
		name  string
		hand  func() (ossl.SignFunc, error)
		plain ossl.SignFunc
	}{
		{"RS256-sign", func() (ossl.SignFunc, error) { return ossl.RSA(rk) },
			func(d []byte) ([]byte, error) { return rsa.SignPKCS1v15(nil, rk, crypto.SHA256, d) }},
		{"ES256-sign", func() (ossl.SignFunc, error) { return ossl.ECDSA(ek) },
			func(d []byte) ([]byte, error) { return ecdsa.SignASN1(rand.Reader, ek, d) }},
	} {
		for _, arm := range []string{"hand", "plain"} {
			b.Run(c.name+"/ab="+arm, func(b *testing.B) {
				sign := c.plain
				if arm == "hand" {
					var err error
					if sign, err = c.hand(); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportAllocs()
				m := benchcpu.Start(b)
				for range b.N {
					if _, err := sign(d[:]); err != nil {
						b.Fatal(err)
					}
				}
				m.Report(b)
			})
		}
	}
}
