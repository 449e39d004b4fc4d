package users_test

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

	"github.com/gatehouse-id/gatehouse/services/directory/internal/users"
)

func TestParsePublicKey(t *testing.T) {
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	der, _ := x509.MarshalPKIXPublicKey(&k.PublicKey)
	pkix := string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}))
	pkcs1 := string(pem.EncodeToMemory(&pem.Block{Type: "RSA PUBLIC KEY", Bytes: x509.MarshalPKCS1PublicKey(&k.PublicKey)}))
	ec, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	ecDER, _ := x509.MarshalPKIXPublicKey(&ec.PublicKey)
	ecPEM := string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: ecDER}))

	for _, ok := range []string{pkix, pkcs1, "\n  " + pkix + "\n\n", pkix + strings.Repeat(" ", users.MaxPublicKeyBytes-len(pkix))} {
		got, err := users.ParsePublicKey([]byte(ok))
		if err != nil || got != pkix {
			t.Errorf("ParsePublicKey(%.40q…) = %.40q, %v; want the PKIX PEM", ok, got, err)
		}
	}
	for name, bad := range map[string]string{
		"too long":     pkix + strings.Repeat(" ", users.MaxPublicKeyBytes-len(pkix)+1),
		"empty":        "",
		"not PEM":      "ssh-rsa AAAAB3Nza",
		"leading text": "key:\n" + pkix,
		"two blocks":   pkix + pkix,
		"EC key":       ecPEM,
		"wrong type":   strings.ReplaceAll(pkix, "PUBLIC KEY", "CERTIFICATE"),
		"garbage DER":  string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: []byte("nope")})),
	} {
		if _, err := users.ParsePublicKey([]byte(bad)); !errors.Is(err, users.ErrInvalidPublicKey) {
			t.Errorf("%s: err %v; want ErrInvalidPublicKey", name, err)
		}
	}
}
