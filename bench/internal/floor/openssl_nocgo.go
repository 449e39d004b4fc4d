//go:build !(cgo && unix)

package floor

import (
	"crypto/ecdsa"
	"crypto/rsa"
	"errors"
)

func opensslOps(*rsa.PrivateKey, *ecdsa.PrivateKey, []byte) ([]operation, error) {
	return nil, errors.New("built without cgo")
}
