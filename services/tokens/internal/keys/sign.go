package keys

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math/big"
	"time"

	"golang.org/x/crypto/cryptobyte"
	casn1 "golang.org/x/crypto/cryptobyte/asn1"
)

// es256Size is the length of r and of s in an ES256 signature (RFC 7518 §3.4).
const es256Size = 32

// Signer is a key that may sign: its private key, parsed once per process,
// and its JWS header, serialized once. It is immutable and safe for
// concurrent use.
type Signer struct {
	KeyID     string
	Algorithm string
	// Key is the private key, for callers that need to sign something other
	// than a compact JWT; it must not be logged or serialized.
	Key      crypto.Signer
	SignFrom time.Time
	// Library is what computes the signatures: LibraryGo or LibraryOpenSSL.
	Library string

	header []byte // base64url(JOSE header) + "."
	// atHeader is header with typ at+jwt, for access tokens (RFC 9068
	// §2.1: resource servers tell them from ID tokens by it).
	atHeader []byte
	sigLen   int // encoded signature length, to size the output once
	signRaw  func(signingInput []byte) ([]byte, error)
}

type joseHeader struct {
	Alg string `json:"alg"`
	Kid string `json:"kid"`
	Typ string `json:"typ"`
}

// TypeAccessToken is the JOSE typ of JWT access tokens (RFC 9068 §2.1).
const TypeAccessToken = "at+jwt"

func newSigner(kid, alg string, key crypto.Signer, signFrom time.Time) (*Signer, error) {
	enc := base64.RawURLEncoding
	s := &Signer{KeyID: kid, Algorithm: alg, Key: key, SignFrom: signFrom, Library: LibraryGo}
	for typ, dst := range map[string]*[]byte{"JWT": &s.header, TypeAccessToken: &s.atHeader} {
		h, err := json.Marshal(joseHeader{Alg: alg, Kid: kid, Typ: typ})
		if err != nil {
			return nil, fmt.Errorf("encode JWS header: %w", err)
		}
		*dst = append(enc.AppendEncode(nil, h), '.')
	}
	switch k := key.(type) {
	case *rsa.PrivateKey:
		s.sigLen = enc.EncodedLen(k.Size())
		s.signRaw = func(in []byte) ([]byte, error) {
			d := sha256.Sum256(in)
			// The random source is ignored by PKCS #1 v1.5 signing.
			return rsa.SignPKCS1v15(nil, k, crypto.SHA256, d[:])
		}
	case *ecdsa.PrivateKey:
		s.sigLen = enc.EncodedLen(2 * es256Size)
		s.signRaw = func(in []byte) ([]byte, error) {
			d := sha256.Sum256(in)
			der, err := ecdsa.SignASN1(rand.Reader, k, d[:])
			if err != nil {
				return nil, err
			}
			return rawECDSA(der)
		}
	case ed25519.PrivateKey:
		s.sigLen = enc.EncodedLen(ed25519.SignatureSize)
		s.signRaw = func(in []byte) ([]byte, error) { return ed25519.Sign(k, in), nil }
	default:
		return nil, fmt.Errorf("signing key of type %T is not supported", key)
	}
	return s, nil
}

// useDigestSigner makes s sign with sign, a function of the SHA-256 digest
// of the signing input that returns the JWS signature bytes (RS256, ES256).
func (s *Signer) useDigestSigner(sign func(digest []byte) ([]byte, error), library string) {
	s.Library = library
	s.signRaw = func(in []byte) ([]byte, error) {
		d := sha256.Sum256(in)
		return sign(d[:])
	}
}

// Sign returns the compact JWS (RFC 7515 §7.1) of claims, a JSON object the
// caller has serialized: base64url(header) "." base64url(claims) "."
// base64url(signature), with header {"alg","kid","typ":"JWT"}. It does not
// look at the claims; validity times are the caller's.
func (s *Signer) Sign(claims []byte) (string, error) { return s.sign(s.header, claims) }

// SignAccessToken is Sign with the header's typ at+jwt (RFC 9068).
func (s *Signer) SignAccessToken(claims []byte) (string, error) { return s.sign(s.atHeader, claims) }

func (s *Signer) sign(header, claims []byte) (string, error) {
	enc := base64.RawURLEncoding
	n := len(header) + enc.EncodedLen(len(claims))
	buf := make([]byte, n, n+1+s.sigLen)
	copy(buf, header)
	enc.Encode(buf[len(header):], claims)
	sig, err := s.signRaw(buf)
	if err != nil {
		return "", fmt.Errorf("sign with key %s: %w", s.KeyID, err)
	}
	buf = append(buf, '.')
	buf = enc.AppendEncode(buf, sig)
	return string(buf), nil
}

// rawECDSA converts an ASN.1 ECDSA signature into the fixed-size r||s form
// JWS requires (RFC 7518 §3.4). It parses with cryptobyte, as crypto/ecdsa
// does, rather than encoding/asn1's reflection (575 → 254 ns, BenchmarkRawECDSA).
func rawECDSA(der []byte) ([]byte, error) {
	r, s := new(big.Int), new(big.Int)
	var seq cryptobyte.String
	in := cryptobyte.String(der)
	if !in.ReadASN1(&seq, casn1.SEQUENCE) || !in.Empty() ||
		!seq.ReadASN1Integer(r) || !seq.ReadASN1Integer(s) || !seq.Empty() ||
		r.Sign() <= 0 || s.Sign() <= 0 || r.BitLen() > 8*es256Size || s.BitLen() > 8*es256Size {
		return nil, fmt.Errorf("malformed ECDSA signature")
	}
	out := make([]byte, 2*es256Size)
	r.FillBytes(out[:es256Size])
	s.FillBytes(out[es256Size:])
	return out, nil
}
