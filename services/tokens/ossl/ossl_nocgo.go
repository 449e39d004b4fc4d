//go:build !(cgo && unix)

package ossl

import (
	"crypto/ecdsa"
	"crypto/rsa"
)

// Load fails: this build has no cgo.
func Load() (string, error) { return "", ErrUnavailable }

func newRSA(*rsa.PrivateKey) (SignFunc, error) { return nil, ErrUnavailable }

func newECDSA(*ecdsa.PrivateKey) (SignFunc, error) { return nil, ErrUnavailable }
