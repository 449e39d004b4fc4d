package projects

import (
	"bytes"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"strconv"
)

// Public key limits (the management proto's, plus Go's own upper bound on
// RSA sizes so a registered key can always be used to verify).
const (
	MaxPublicKeyBytes = 10000
	MinRSABits        = 2048
	MaxRSABits        = 16384
	generatedRSABits  = 2048
)

// KeyError says why a submitted public key is refused; Msg is safe to show
// to the caller.
type KeyError struct{ Msg string }

func (e *KeyError) Error() string { return "public key " + e.Msg }

func keyError(msg string) error { return &KeyError{Msg: msg} }

// ParsePublicKey accepts one PEM-encoded RSA public key ("PUBLIC KEY", PKIX,
// or "RSA PUBLIC KEY", PKCS #1) of MinRSABits to MaxRSABits and returns it
// re-encoded as PKIX PEM, the form stored and handed to the token endpoint.
func ParsePublicKey(raw []byte) (string, error) {
	if len(raw) > MaxPublicKeyBytes {
		return "", keyError("must have at most " + strconv.Itoa(MaxPublicKeyBytes) + " bytes")
	}
	block, rest := pem.Decode(raw)
	if block == nil {
		return "", keyError("is not PEM-encoded")
	}
	if len(bytes.TrimSpace(rest)) != 0 {
		return "", keyError("must be a single PEM block")
	}
	var pub *rsa.PublicKey
	switch block.Type {
	case "PUBLIC KEY":
		k, err := x509.ParsePKIXPublicKey(block.Bytes)
		if err != nil {
			return "", keyError("cannot be parsed")
		}
		rk, ok := k.(*rsa.PublicKey)
		if !ok {
			return "", keyError("must be an RSA key")
		}
		pub = rk
	case "RSA PUBLIC KEY":
		k, err := x509.ParsePKCS1PublicKey(block.Bytes)
		if err != nil {
			return "", keyError("cannot be parsed")
		}
		pub = k
	default:
		return "", keyError("must be a PEM \"PUBLIC KEY\" block, not " + strconv.Quote(block.Type))
	}
	if bits := pub.N.BitLen(); bits < MinRSABits || bits > MaxRSABits {
		return "", keyError("must have " + strconv.Itoa(MinRSABits) + " to " + strconv.Itoa(MaxRSABits) + " bits")
	}
	return encodePublic(pub)
}

func encodePublic(pub *rsa.PublicKey) (string, error) {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return "", fmt.Errorf("projects: encode public key: %w", err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})), nil
}

// generateKey returns a new RSA key pair as PKCS #1 private key PEM (the key
// file format) and PKIX public key PEM.
func generateKey() (privatePEM, publicPEM string, err error) {
	k, err := rsa.GenerateKey(rand.Reader, generatedRSABits)
	if err != nil {
		return "", "", fmt.Errorf("projects: generate key: %w", err)
	}
	pub, err := encodePublic(&k.PublicKey)
	if err != nil {
		return "", "", err
	}
	priv := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(k)})
	return string(priv), pub, nil
}

// KeyFile is the JSON key file returned once for a generated app key.
type KeyFile struct {
	Type     string `json:"type"` // always "application"
	KeyID    string `json:"keyId"`
	Key      string `json:"key"` // PKCS #1 private key PEM
	AppID    string `json:"appId"`
	ClientID string `json:"clientId"`
}

func (k KeyFile) marshal() ([]byte, error) {
	b, err := json.Marshal(k)
	if err != nil {
		return nil, fmt.Errorf("projects: encode key file: %w", err)
	}
	return b, nil
}
