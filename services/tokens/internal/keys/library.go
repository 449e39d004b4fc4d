package keys

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/rsa"
	"fmt"
	"log/slog"
	"runtime"
	"time"

	"github.com/gatehouse-id/gatehouse/services/tokens/ossl"
)

// Signing libraries (Options.Library, GATEHOUSE_SIGNING_LIBRARY).
const (
	LibraryAuto    = "auto"
	LibraryOpenSSL = "openssl"
	LibraryGo      = "go"
)

// CheckLibrary reports whether lib names a signing library.
func CheckLibrary(lib string) error {
	switch lib {
	case LibraryAuto, LibraryOpenSSL, LibraryGo:
		return nil
	}
	return fmt.Errorf("unknown signing library %q (want auto, openssl or go)", lib)
}

// useOpenSSL loads OpenSSL unless lib is LibraryGo, and returns its
// version text when keys will be signed with it ("" otherwise); a failure
// to load is an error only for LibraryOpenSSL.
func useOpenSSL(lib string, log *slog.Logger) (string, error) {
	if lib == LibraryGo {
		log.Info("signing keys: signing with the Go standard library", "library", lib)
		return "", nil
	}
	version, err := ossl.Load()
	switch {
	case err == nil:
		log.Info("signing keys: signing RS256 and ES256 with OpenSSL", "openssl", version)
		return version, nil
	case lib == LibraryOpenSSL:
		return "", fmt.Errorf("GATEHOUSE_SIGNING_LIBRARY=openssl: %w", err)
	}
	log.Info("signing keys: OpenSSL unavailable; signing with the Go standard library", "reason", err.Error())
	return "", nil
}

// Library reports what signs this manager's RS256 and ES256 keys,
// LibraryOpenSSL or LibraryGo, and the OpenSSL version text if any. A key
// OpenSSL refused signs with Go regardless (see Signer.Library).
func (m *Manager) Library() (library, version string) {
	if m.ossl == "" {
		return LibraryGo, runtime.Version()
	}
	return LibraryOpenSSL, m.ossl
}

// newSigner builds the signer of a key, with OpenSSL's signing function
// where the manager uses OpenSSL. If OpenSSL refuses the key or fails its
// self-test, the key signs with the standard library (or, with
// LibraryOpenSSL, does not load).
func (m *Manager) newSigner(kid, alg string, key crypto.Signer, signFrom time.Time) (*Signer, error) {
	s, err := newSigner(kid, alg, key, signFrom)
	if err != nil || m.ossl == "" {
		return s, err
	}
	var sign ossl.SignFunc
	switch k := key.(type) {
	case *rsa.PrivateKey:
		sign, err = ossl.RSA(k)
	case *ecdsa.PrivateKey:
		if sign, err = ossl.ECDSA(k); err == nil {
			der := sign
			sign = func(d []byte) ([]byte, error) {
				sig, err := der(d)
				if err != nil {
					return nil, err
				}
				return rawECDSA(sig)
			}
		}
	default:
		return s, nil
	}
	if err != nil {
		if m.o.Library == LibraryOpenSSL {
			return nil, fmt.Errorf("key %s: %w", kid, err)
		}
		m.o.Logger.Warn("signing keys: OpenSSL refused a key; it signs with the Go standard library", "kid", kid, "err", err)
		return s, nil
	}
	s.useDigestSigner(sign, LibraryOpenSSL)
	return s, nil
}
