package ossl_test

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/gatehouse-id/gatehouse/services/tokens/internal/ossltest"
	"github.com/gatehouse-id/gatehouse/services/tokens/ossl"
)

// TestSignaturesVerifyWithTheStandardLibrary signs with a few fresh keys of
// each kind (a wrong limb order would not pass by luck) and checks each
// signature with crypto/rsa or crypto/ecdsa.
func TestSignaturesVerifyWithTheStandardLibrary(t *testing.T) {
	ossltest.Require(t)
	other := sha256.Sum256([]byte("another message"))
	for _, c := range []struct {
		name string
		// signer makes a key and returns its OpenSSL signer and a check of
		// a signature over a digest.
		signer func() (ossl.SignFunc, func(digest, sig []byte) error, error)
	}{
		{"RSA", func() (ossl.SignFunc, func(d, sig []byte) error, error) {
			k, err := rsa.GenerateKey(rand.Reader, 2048)
			if err != nil {
				return nil, nil, err
			}
			sign, err := ossl.RSA(k)
			return sign, func(d, sig []byte) error {
				if err := rsa.VerifyPKCS1v15(&k.PublicKey, crypto.SHA256, d, sig); err != nil {
					return err
				}
				// PKCS #1 v1.5 is deterministic: OpenSSL must agree with crypto/rsa bit for bit.
				if want, _ := rsa.SignPKCS1v15(nil, k, crypto.SHA256, d); string(sig) != string(want) {
					return errors.New("OpenSSL and crypto/rsa signatures differ")
				}
				return nil
			}, err
		}},
		{"ECDSA", func() (ossl.SignFunc, func(d, sig []byte) error, error) {
			k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
			if err != nil {
				return nil, nil, err
			}
			sign, err := ossl.ECDSA(k)
			return sign, func(d, sig []byte) error {
				if !ecdsa.VerifyASN1(&k.PublicKey, d, sig) {
					return errors.New("signature does not verify")
				}
				if ecdsa.VerifyASN1(&k.PublicKey, other[:], sig) {
					return errors.New("signature verifies for another digest")
				}
				return nil
			}, err
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			for i := range 3 {
				sign, check, err := c.signer()
				if err != nil {
					t.Fatal(err)
				}
				d := sha256.Sum256(fmt.Appendf(nil, "message %d", i))
				sig, err := sign(d[:])
				if err == nil {
					err = check(d[:], sig)
				}
				if err != nil {
					t.Fatalf("key %d: %v", i, err)
				}
			}
		})
	}
}

func TestECDSAOtherCurvesRefused(t *testing.T) {
	ossltest.Require(t)
	k, err := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ossl.ECDSA(k); err == nil {
		t.Fatal("P-384 key accepted")
	}
}

func TestRSAWithoutCRTValuesRefused(t *testing.T) {
	ossltest.Require(t)
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	k.Precomputed.Dp = nil // as for a key that was never precomputed
	if _, err := ossl.RSA(k); err == nil {
		t.Fatal("key without CRT values accepted")
	}
}

// TestConcurrentSigning signs from many goroutines with one key: the
// library shares one EVP_PKEY between them.
func TestConcurrentSigning(t *testing.T) {
	ossltest.Require(t)
	rk, _ := rsa.GenerateKey(rand.Reader, 2048)
	ek, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	rs, err := ossl.RSA(rk)
	if err != nil {
		t.Fatal(err)
	}
	es, err := ossl.ECDSA(ek)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for g := range 8 {
		wg.Go(func() {
			for i := range 20 {
				d := sha256.Sum256(fmt.Appendf(nil, "%d/%d", g, i))
				sig, err := rs(d[:])
				if err == nil {
					err = rsa.VerifyPKCS1v15(&rk.PublicKey, crypto.SHA256, d[:], sig)
				}
				if err == nil {
					if sig, err = es(d[:]); err == nil && !ecdsa.VerifyASN1(&ek.PublicKey, d[:], sig) {
						err = fmt.Errorf("ECDSA signature %d/%d does not verify", g, i)
					}
				}
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
