package floor

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"fmt"
	"syscall"
	"time"

	"github.com/gatehouse-id/gatehouse/services/tokens/ossl"
)

// Cost is the CPU time of one operation, averaged over Ops runs.
type Cost struct {
	Name  string
	Op    Op
	Ops   int
	PerOp time.Duration
}

// Op names an operation and the library that performs it.
type Op struct {
	Alg     string // "RS256 sign", "ES256 sign", "RS256 verify"
	Library string // "go" (the standard library) or "openssl"
}

// Budget bounds each measurement: it runs until both MinOps operations and
// MinCPU of CPU time are done.
type Budget struct {
	MinOps int
	MinCPU time.Duration
}

// DefaultBudget gives stable figures in about a second per operation.
var DefaultBudget = Budget{MinOps: 200, MinCPU: 500 * time.Millisecond}

// Measure returns the per-operation cost of RS256 sign, ES256 sign and
// RS256 verify with the standard library, and of RS256 and ES256 sign with
// OpenSSL where it loads (the tokens service's default signer). It reads this process's CPU time (getrusage, microsecond
// resolution), so run it while the process does nothing else.
func Measure(ctx context.Context, b Budget) ([]Cost, error) {
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, fmt.Errorf("generate RSA key: %w", err)
	}
	ecKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate P-256 key: %w", err)
	}
	// A typical JWT signing input is a few hundred bytes; only its digest
	// is signed, so its exact size does not matter.
	digest := sha256.Sum256([]byte(`eyJhbGciOiJSUzI1NiIsImtpZCI6ImJlbmNoIiwidHlwIjoiSldUIn0.eyJpc3MiOiJodHRwOi8vMTI3LjAuMC4xIn0`))
	sig, err := rsa.SignPKCS1v15(nil, rsaKey, crypto.SHA256, digest[:])
	if err != nil {
		return nil, fmt.Errorf("RS256 sign: %w", err)
	}
	ops := []operation{
		{"RS256 sign (RSA-2048 PKCS#1 v1.5), Go crypto/rsa", Op{"RS256 sign", "go"}, func() error {
			_, err := rsa.SignPKCS1v15(nil, rsaKey, crypto.SHA256, digest[:])
			return err
		}},
		{"ES256 sign (ECDSA P-256), Go crypto/ecdsa", Op{"ES256 sign", "go"}, func() error {
			_, _, err := ecdsa.Sign(rand.Reader, ecKey, digest[:])
			return err
		}},
		{"RS256 verify, Go crypto/rsa", Op{"RS256 verify", "go"}, func() error {
			return rsa.VerifyPKCS1v15(&rsaKey.PublicKey, crypto.SHA256, digest[:], sig)
		}},
	}
	if more, err := opensslOps(rsaKey, ecKey, digest[:]); err == nil {
		ops = append(ops, more...)
	} // else: no cgo or no libcrypto.so.3; the server signs with Go too
	out := make([]Cost, 0, len(ops))
	for _, op := range ops {
		c, err := measure(ctx, op, b)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, nil
}

// opensslOps are RS256 and ES256 signing by OpenSSL through the tokens
// service's own signer (services/tokens/ossl), where it loads.
func opensslOps(rk *rsa.PrivateKey, ek *ecdsa.PrivateKey, digest []byte) ([]operation, error) {
	v, err := ossl.Load()
	if err != nil {
		return nil, err
	}
	rs, err := ossl.RSA(rk)
	if err != nil {
		return nil, err
	}
	es, err := ossl.ECDSA(ek)
	if err != nil {
		return nil, err
	}
	return []operation{
		{"RS256 sign, " + v, Op{"RS256 sign", "openssl"}, func() error { _, err := rs(digest); return err }},
		{"ES256 sign, " + v, Op{"ES256 sign", "openssl"}, func() error { _, err := es(digest); return err }},
	}, nil
}

type operation struct {
	name string
	op   Op
	fn   func() error
}

func measure(ctx context.Context, o operation, b Budget) (Cost, error) {
	name, fn := o.name, o.fn
	for range 3 { // warm caches and lazily built tables
		if err := fn(); err != nil {
			return Cost{}, fmt.Errorf("%s: %w", name, err)
		}
	}
	start, err := selfCPU()
	if err != nil {
		return Cost{}, err
	}
	n := 0
	for {
		if err := fn(); err != nil {
			return Cost{}, fmt.Errorf("%s: %w", name, err)
		}
		n++
		if n%16 != 0 || n < b.MinOps {
			continue
		}
		now, err := selfCPU()
		if err != nil {
			return Cost{}, err
		}
		if now-start >= b.MinCPU || ctx.Err() != nil {
			return Cost{Name: name, Op: o.op, Ops: n, PerOp: (now - start) / time.Duration(n)}, nil
		}
	}
}

// selfCPU is this process's user plus system CPU time.
func selfCPU() (time.Duration, error) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, fmt.Errorf("getrusage: %w", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), nil
}
