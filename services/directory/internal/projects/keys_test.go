package projects

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"strings"
	"testing"
)

func TestParsePublicKey(t *testing.T) {
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	small, err := rsa.GenerateKey(rand.Reader, 1024)
	if err != nil {
		t.Fatal(err)
	}
	ec, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	pkix := func(pub any) []byte {
		der, err := x509.MarshalPKIXPublicKey(pub)
		if err != nil {
			t.Fatal(err)
		}
		return pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
	}
	want := string(pkix(&k.PublicKey))
	ok := map[string][]byte{
		"PKIX":               pkix(&k.PublicKey),
		"PKCS #1":            pem.EncodeToMemory(&pem.Block{Type: "RSA PUBLIC KEY", Bytes: x509.MarshalPKCS1PublicKey(&k.PublicKey)}),
		"trailing newlines":  append(pkix(&k.PublicKey), "\n\n"...),
		"exactly 10000 byte": append(pkix(&k.PublicKey), strings.Repeat(" ", MaxPublicKeyBytes-len(pkix(&k.PublicKey)))...),
	}
	for name, raw := range ok {
		got, err := ParsePublicKey(raw)
		if err != nil || got != want {
			t.Errorf("%s: %q, %v; want the PKIX PEM", name, got, err)
		}
	}
	bad := map[string][]byte{
		"10001 bytes":      append(pkix(&k.PublicKey), strings.Repeat(" ", MaxPublicKeyBytes+1-len(pkix(&k.PublicKey)))...),
		"1024 bits":        pkix(&small.PublicKey),
		"EC":               pkix(&ec.PublicKey),
		"not PEM":          []byte("ssh-rsa AAAA"),
		"private key":      pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(k)}),
		"corrupt body":     pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: []byte("nope")}),
		"two blocks":       append(pkix(&k.PublicKey), pkix(&k.PublicKey)...),
		"text after block": append(pkix(&k.PublicKey), "junk"...),
	}
	for name, raw := range bad {
		_, err := ParsePublicKey(raw)
		var ke *KeyError
		if !errors.As(err, &ke) {
			t.Errorf("%s: %v; want a KeyError", name, err)
		}
	}
}

func TestGenerateKey(t *testing.T) {
	priv, pub, err := generateKey()
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode([]byte(priv))
	if block == nil || block.Type != "RSA PRIVATE KEY" {
		t.Fatalf("private PEM %q", priv)
	}
	k, err := x509.ParsePKCS1PrivateKey(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := ParsePublicKey([]byte(pub)); err != nil || got != pub || k.N.BitLen() != 2048 {
		t.Fatalf("public half %q does not round-trip: %v", pub, err)
	}
	der, _ := x509.MarshalPKIXPublicKey(&k.PublicKey)
	if string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})) != pub {
		t.Fatal("public PEM is not the private key's public half")
	}
}
