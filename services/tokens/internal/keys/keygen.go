package keys

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/lestrrat-go/jwx/v3/jwa"
	"github.com/lestrrat-go/jwx/v3/jwk"
)

// JWS algorithms a key can have.
const (
	RS256 = "RS256" // RSASSA-PKCS1-v1_5 with SHA-256, RSA 2048
	ES256 = "ES256" // ECDSA P-256 with SHA-256
	EdDSA = "EdDSA" // Ed25519
)

// Algorithms lists the supported algorithms, the default first.
var Algorithms = []string{RS256, ES256, EdDSA}

// rsaBits is the size of generated RSA keys.
const rsaBits = 2048

// ErrUnsupportedAlgorithm is returned for an algorithm not in Algorithms.
var ErrUnsupportedAlgorithm = errors.New("unsupported signing algorithm (want RS256, ES256 or EdDSA)")

// CheckAlgorithm returns ErrUnsupportedAlgorithm (wrapped, naming alg) for
// anything but RS256, ES256 or EdDSA; names are case-sensitive (RFC 7518).
func CheckAlgorithm(alg string) error {
	switch alg {
	case RS256, ES256, EdDSA:
		return nil
	}
	return fmt.Errorf("%w: %q", ErrUnsupportedAlgorithm, alg)
}

func jwaAlgorithm(alg string) jwa.SignatureAlgorithm {
	switch alg {
	case ES256:
		return jwa.ES256()
	case EdDSA:
		return jwa.EdDSA()
	}
	return jwa.RS256()
}

// generate makes a new private key for alg.
func generate(alg string) (crypto.Signer, error) {
	switch alg {
	case RS256:
		k, err := rsa.GenerateKey(rand.Reader, rsaBits)
		if err != nil {
			return nil, fmt.Errorf("generate RSA key: %w", err)
		}
		return k, nil
	case ES256:
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return nil, fmt.Errorf("generate P-256 key: %w", err)
		}
		return k, nil
	case EdDSA:
		_, k, err := ed25519.GenerateKey(rand.Reader)
		if err != nil {
			return nil, fmt.Errorf("generate Ed25519 key: %w", err)
		}
		return k, nil
	}
	return nil, CheckAlgorithm(alg)
}

// parsePrivate decodes a PKCS #8 private key and checks that it fits alg,
// so a row whose algorithm and key disagree is refused at load rather than
// producing tokens no one can verify.
func parsePrivate(alg string, der []byte) (crypto.Signer, error) {
	k, err := x509.ParsePKCS8PrivateKey(der)
	if err != nil {
		return nil, fmt.Errorf("parse private key: %w", err)
	}
	switch k := k.(type) {
	case *rsa.PrivateKey:
		if alg == RS256 && k.N.BitLen() >= rsaBits {
			return k, nil // ParsePKCS8PrivateKey has precomputed the CRT values
		}
	case *ecdsa.PrivateKey:
		if alg == ES256 && k.Curve == elliptic.P256() {
			return k, nil
		}
	case ed25519.PrivateKey:
		if alg == EdDSA {
			return k, nil
		}
	}
	return nil, fmt.Errorf("private key of type %T does not fit algorithm %s", k, alg)
}

// publicJWK returns the public JWK of a key: kid, use "sig" and alg set,
// with its JSON form for storage.
func publicJWK(kid, alg string, pub crypto.PublicKey) (jwk.Key, []byte, error) {
	k, err := jwk.Import(pub)
	if err != nil {
		return nil, nil, fmt.Errorf("public JWK: %w", err)
	}
	for name, v := range map[string]any{
		jwk.KeyIDKey:     kid,
		jwk.KeyUsageKey:  jwk.ForSignature,
		jwk.AlgorithmKey: jwaAlgorithm(alg),
	} {
		if err := k.Set(name, v); err != nil {
			return nil, nil, fmt.Errorf("public JWK %s: %w", name, err)
		}
	}
	raw, err := json.Marshal(k)
	if err != nil {
		return nil, nil, fmt.Errorf("encode public JWK: %w", err)
	}
	return k, raw, nil
}

// parsePublicJWK decodes a stored public JWK and checks that it is public
// and matches the row's kid and algorithm.
func parsePublicJWK(kid, alg string, raw []byte) (jwk.Key, crypto.PublicKey, error) {
	k, err := jwk.ParseKey(raw)
	if err != nil {
		return nil, nil, fmt.Errorf("parse public JWK: %w", err)
	}
	if priv, err := jwk.IsPrivateKey(k); err != nil || priv {
		return nil, nil, errors.New("stored JWK is not a public key")
	}
	if got, _ := k.KeyID(); got != kid {
		return nil, nil, fmt.Errorf("stored JWK kid %q, want %q", got, kid)
	}
	if got, ok := k.Algorithm(); !ok || got.String() != alg {
		return nil, nil, fmt.Errorf("stored JWK alg does not match %s", alg)
	}
	var pub any
	if err := jwk.Export(k, &pub); err != nil {
		return nil, nil, fmt.Errorf("export public JWK: %w", err)
	}
	switch p := pub.(type) {
	case *rsa.PublicKey:
		if alg == RS256 {
			return k, p, nil
		}
	case *ecdsa.PublicKey:
		if alg == ES256 && p.Curve == elliptic.P256() {
			return k, p, nil
		}
	case ed25519.PublicKey:
		if alg == EdDSA {
			return k, p, nil
		}
	}
	return nil, nil, fmt.Errorf("public key of type %T does not fit algorithm %s", pub, alg)
}
