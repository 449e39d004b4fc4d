package floor

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"syscall"
	"time"

	"github.com/gatehouse-id/gatehouse/pkg/secrets"
	"github.com/gatehouse-id/gatehouse/services/tokens/dpop"
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
	Alg     string // "RS256 sign", "ES256 sign", "RS256 verify", "argon2id verify"
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

// Argon2idVerify is the password check of every login.
var Argon2idVerify = Op{"argon2id verify", "go"}

// ES256Verify is a DPoP proof's signature check (the proofs of make
// bench's token-dpop are ES256).
var ES256Verify = Op{"ES256 verify", "go"}

// ProofCheck is the tokens service's check of a DPoP proof (ES256) with
// the embedded server's replay store (in memory).
var ProofCheck = Op{"DPoP proof check", "go"}

// Measure returns the per-operation cost of RS256 sign, ES256 sign and
// RS256 verify with the standard library, of RS256 and ES256 sign with
// OpenSSL where it loads (the tokens service's default signer), and of an
// argon2id password check as the directory service makes it. It reads this
// process's CPU time (getrusage, microsecond resolution), so run it while
// the process does nothing else.
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
	ecSig, err := ecdsa.SignASN1(rand.Reader, ecKey, digest[:])
	if err != nil {
		return nil, fmt.Errorf("ES256 sign: %w", err)
	}
	ops := []operation{
		{name: "RS256 sign (RSA-2048 PKCS#1 v1.5), Go crypto/rsa", op: Op{"RS256 sign", "go"}, fn: func() error {
			_, err := rsa.SignPKCS1v15(nil, rsaKey, crypto.SHA256, digest[:])
			return err
		}},
		{name: "ES256 sign (ECDSA P-256), Go crypto/ecdsa", op: Op{"ES256 sign", "go"}, fn: func() error {
			_, _, err := ecdsa.Sign(rand.Reader, ecKey, digest[:])
			return err
		}},
		{name: "RS256 verify, Go crypto/rsa", op: Op{"RS256 verify", "go"}, fn: func() error {
			return rsa.VerifyPKCS1v15(&rsaKey.PublicKey, crypto.SHA256, digest[:], sig)
		}},
		{name: "ES256 verify (a DPoP proof's signature), Go crypto/ecdsa", op: ES256Verify, fn: func() error {
			if !ecdsa.VerifyASN1(&ecKey.PublicKey, digest[:], ecSig) {
				return errors.New("ES256 signature does not verify")
			}
			return nil
		}},
	}
	proof, err := proofOp(ecKey)
	if err != nil {
		return nil, err
	}
	ops = append(ops, proof)
	if more, err := opensslOps(rsaKey, ecKey, digest[:]); err == nil {
		ops = append(ops, more...)
	} // else: no cgo or no libcrypto.so.3; the server signs with Go too
	verify, err := passwordOp(ctx)
	if err != nil {
		return nil, err
	}
	ops = append(ops, verify)
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
		{name: "RS256 sign, " + v, op: Op{"RS256 sign", "openssl"}, fn: func() error { _, err := rs(digest); return err }},
		{name: "ES256 sign, " + v, op: Op{"ES256 sign", "openssl"}, fn: func() error { _, err := es(digest); return err }},
	}, nil
}

// passwordOp is secrets.VerifyPassword, the directory service's check of
// a login's password, against a hash secrets.HashPassword made: the
// server's own code with its own argon2id parameters.
func passwordOp(ctx context.Context) (operation, error) {
	const password = "Floor-Passw0rd!"
	hash, err := secrets.HashPassword(ctx, password)
	if err != nil {
		return operation{}, fmt.Errorf("argon2id hash: %w", err)
	}
	return operation{
		name: "argon2id verify (" + argon2Params(hash) + "), Go x/crypto through the server's pkg/secrets",
		op:   Argon2idVerify,
		fn: func() error {
			ok, _, err := secrets.VerifyPassword(ctx, password, hash)
			if err == nil && !ok {
				err = errors.New("the password does not match its own hash")
			}
			return err
		},
		// One check takes tens of milliseconds: MinCPU bounds it already.
		minOps: 16,
	}, nil
}

// proofOp is ProofCheck: the tokens service's own dpop.Verifier, with the
// embedded server's replay store (in memory), on fresh ES256 proofs signed
// ahead (the signing is a client's, not measured).
func proofOp(ecKey *ecdsa.PrivateKey) (operation, error) {
	const n = 4096
	b64 := base64.RawURLEncoding.EncodeToString
	h, err := json.Marshal(map[string]any{"typ": "dpop+jwt", "alg": "ES256", "jwk": map[string]string{
		"kty": "EC", "crv": "P-256", "x": b64(ecKey.X.FillBytes(make([]byte, 32))), "y": b64(ecKey.Y.FillBytes(make([]byte, 32)))}})
	if err != nil {
		return operation{}, err
	}
	const u = "https://id.example.com/oauth/v2/token"
	sign := func(i int) (string, error) {
		c, err := json.Marshal(map[string]any{"jti": fmt.Sprintf("floor-%d-%d", time.Now().UnixNano(), i), "htm": "POST", "htu": u,
			"iat": time.Now().Unix()})
		if err != nil {
			return "", err
		}
		input := b64(h) + "." + b64(c)
		digest := sha256.Sum256([]byte(input))
		r, s, err := ecdsa.Sign(rand.Reader, ecKey, digest[:])
		if err != nil {
			return "", err
		}
		return input + "." + b64(append(r.FillBytes(make([]byte, 32)), s.FillBytes(make([]byte, 32))...)), nil
	}
	proofs := make([]string, n)
	for i := range proofs {
		if proofs[i], err = sign(i); err != nil {
			return operation{}, err
		}
	}
	v := &dpop.Verifier{Replay: &dpop.MemoryReplay{}}
	req := dpop.Request{Method: "POST", URL: u}
	i := 0
	return operation{name: "DPoP proof check (ES256), the server's services/tokens/dpop with its in-memory replay store", op: ProofCheck,
		fn: func() error {
			if i == len(proofs) { // a fresh set (each proof is accepted once)
				v, i = &dpop.Verifier{Replay: &dpop.MemoryReplay{}}, 0
			}
			i++
			_, err := v.Verify(context.Background(), proofs[i-1], req)
			return err
		}, minOps: n - 8}, nil
}

// argon2Params is the parameter field of a PHC argon2id string
// ("$argon2id$v=19$m=19456,t=2,p=1$salt$key"), so the report says what
// was measured.
func argon2Params(phc string) string {
	f := strings.Split(phc, "$")
	if len(f) != 6 {
		return "unknown parameters"
	}
	return f[3]
}

type operation struct {
	name string
	op   Op
	fn   func() error
	// minOps, when not 0, replaces the budget's MinOps: for an operation
	// so slow that MinCPU alone gives enough of them.
	minOps int
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
	minOps := b.MinOps
	if o.minOps > 0 {
		minOps = min(minOps, o.minOps)
	}
	n := 0
	for {
		if err := fn(); err != nil {
			return Cost{}, fmt.Errorf("%s: %w", name, err)
		}
		n++
		if n%16 != 0 || n < minOps {
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
