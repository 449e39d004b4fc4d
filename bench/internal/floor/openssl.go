//go:build cgo && unix

package floor

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/rsa"
	"fmt"
	"math/big"

	"github.com/golang-fips/openssl/v2"
	"github.com/golang-fips/openssl/v2/bbig"
)

// opensslOps are RS256 and ES256 signing by OpenSSL's libcrypto.so.3, as
// the tokens service does by default (services/tokens/internal/ossl).
func opensslOps(rk *rsa.PrivateKey, ek *ecdsa.PrivateKey, digest []byte) ([]operation, error) {
	if err := openssl.Init("libcrypto.so.3"); err != nil {
		return nil, err
	}
	rpk, err := openssl.NewPrivateKeyRSA(bbig.Enc(rk.N), bbig.Enc(big.NewInt(int64(rk.E))), bbig.Enc(rk.D),
		bbig.Enc(rk.Primes[0]), bbig.Enc(rk.Primes[1]),
		bbig.Enc(rk.Precomputed.Dp), bbig.Enc(rk.Precomputed.Dq), bbig.Enc(rk.Precomputed.Qinv))
	if err != nil {
		return nil, fmt.Errorf("OpenSSL RSA key: %w", err)
	}
	d, err := ek.Bytes()
	if err != nil {
		return nil, err
	}
	pub, err := ek.PublicKey.Bytes()
	if err != nil {
		return nil, err
	}
	epk, err := openssl.NewPrivateKeyECDSA("P-256", bbig.Enc(new(big.Int).SetBytes(pub[1:33])),
		bbig.Enc(new(big.Int).SetBytes(pub[33:])), bbig.Enc(new(big.Int).SetBytes(d)))
	if err != nil {
		return nil, fmt.Errorf("OpenSSL ECDSA key: %w", err)
	}
	v := openssl.VersionText()
	return []operation{
		{"RS256 sign, " + v, Op{"RS256 sign", "openssl"}, func() error {
			_, err := openssl.SignRSAPKCS1v15(rpk, crypto.SHA256, digest)
			return err
		}},
		{"ES256 sign, " + v, Op{"ES256 sign", "openssl"}, func() error {
			_, err := openssl.SignMarshalECDSA(epk, digest)
			return err
		}},
	}, nil
}
