//go:build cgo && unix

package ossl

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/rsa"
	"fmt"
	"math/big"

	"github.com/golang-fips/openssl/v2"
	"github.com/golang-fips/openssl/v2/bbig"
)

// Load opens and initializes libcrypto once, and returns its version text
// ("OpenSSL 3.0.19 27 Jan 2026"). Later calls return the first result.
func Load() (string, error) {
	if err := openssl.Init(Library); err != nil {
		return "", fmt.Errorf("load %s: %w", Library, err)
	}
	return openssl.VersionText(), nil
}

func newRSA(k *rsa.PrivateKey) (SignFunc, error) {
	if len(k.Primes) != 2 || k.Precomputed.Dp == nil {
		return nil, fmt.Errorf("want a precomputed two-prime key")
	}
	// The BigInts alias k's words; OpenSSL copies them.
	pk, err := openssl.NewPrivateKeyRSA(bbig.Enc(k.N), bbig.Enc(big.NewInt(int64(k.E))), bbig.Enc(k.D),
		bbig.Enc(k.Primes[0]), bbig.Enc(k.Primes[1]),
		bbig.Enc(k.Precomputed.Dp), bbig.Enc(k.Precomputed.Dq), bbig.Enc(k.Precomputed.Qinv))
	if err != nil {
		return nil, err
	}
	return func(digest []byte) ([]byte, error) {
		return openssl.SignRSAPKCS1v15(pk, crypto.SHA256, digest)
	}, nil
}

func newECDSA(k *ecdsa.PrivateKey) (SignFunc, error) {
	// Bytes gives the scalar, PublicKey.Bytes the uncompressed point
	// 0x04 || X || Y; the deprecated big.Int fields are not read.
	d, err := k.Bytes()
	if err != nil {
		return nil, err
	}
	pub, err := k.PublicKey.Bytes()
	if err != nil {
		return nil, err
	}
	if len(pub) != 65 || pub[0] != 4 {
		return nil, fmt.Errorf("unexpected P-256 point encoding")
	}
	x, y, dd := new(big.Int).SetBytes(pub[1:33]), new(big.Int).SetBytes(pub[33:]), new(big.Int).SetBytes(d)
	clear(d)
	pk, err := openssl.NewPrivateKeyECDSA("P-256", bbig.Enc(x), bbig.Enc(y), bbig.Enc(dd))
	dd.SetInt64(0)
	if err != nil {
		return nil, err
	}
	return func(digest []byte) ([]byte, error) {
		return openssl.SignMarshalECDSA(pk, digest)
	}, nil
}
