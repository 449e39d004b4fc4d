package ossl

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/rsa"
	"crypto/sha256"
	"errors"
	"fmt"
)

// SignFunc signs a SHA-256 digest: a PKCS #1 v1.5 signature for RSA keys,
// an ASN.1 DER signature for ECDSA keys. It is safe for concurrent use.
type SignFunc func(digest []byte) ([]byte, error)

// ErrUnavailable is returned by Load when this build has no cgo.
var ErrUnavailable = errors.New("built without cgo: OpenSSL cannot be loaded")

// Library is the shared library Load opens.
const Library = "libcrypto.so.3"

// selfTestDigest is what each new key signs once, to be verified by the
// standard library before the key is used.
var selfTestDigest = sha256.Sum256([]byte("gatehouse: OpenSSL signing self-test"))

// RSA returns a signer of k's PKCS #1 v1.5 SHA-256 signatures by OpenSSL,
// after checking one of them with crypto/rsa. Load must have succeeded.
func RSA(k *rsa.PrivateKey) (SignFunc, error) {
	sign, err := newRSA(k)
	if err != nil {
		return nil, fmt.Errorf("OpenSSL RSA key: %w", err)
	}
	sig, err := sign(selfTestDigest[:])
	if err == nil {
		err = rsa.VerifyPKCS1v15(&k.PublicKey, crypto.SHA256, selfTestDigest[:], sig)
	}
	if err != nil {
		return nil, fmt.Errorf("OpenSSL RSA self-test: %w", err)
	}
	return sign, nil
}

// ECDSA returns a signer of k's ECDSA signatures (P-256 only) by OpenSSL,
// after checking one of them with crypto/ecdsa. Load must have succeeded.
func ECDSA(k *ecdsa.PrivateKey) (SignFunc, error) {
	if k.Curve.Params().Name != "P-256" {
		return nil, fmt.Errorf("OpenSSL ECDSA key: curve %s is not supported", k.Curve.Params().Name)
	}
	sign, err := newECDSA(k)
	if err != nil {
		return nil, fmt.Errorf("OpenSSL ECDSA key: %w", err)
	}
	sig, err := sign(selfTestDigest[:])
	if err == nil && !ecdsa.VerifyASN1(&k.PublicKey, selfTestDigest[:], sig) {
		err = errors.New("signature does not verify")
	}
	if err != nil {
		return nil, fmt.Errorf("OpenSSL ECDSA self-test: %w", err)
	}
	return sign, nil
}
