package secrets

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/crypto/argon2"
	"golang.org/x/crypto/bcrypt"

	argon2in "github.com/gatehouse-id/gatehouse/pkg/secrets/internal/argon2"
)

// Argon2id parameters (OWASP's second recommended set: 19 MiB, 2 passes).
const (
	argonMemory  = 19 * 1024
	argonTime    = 2
	argonThreads = 1
	argonKeyLen  = 32
	argonSaltLen = 16
)

// Bounds on imported hashes: the parameters of a stored hash set the cost
// of every login attempt against it, anonymous ones included, so an import
// may not choose them freely. Above OWASP's strongest argon2id set (46 MiB)
// and bcrypt's usual 10-12; at the first successful login such a hash is
// rehashed to the current parameters anyway.
const (
	MaxImportArgonMemoryKiB = 64 * 1024
	MaxImportArgonTime      = 4
	MaxImportArgonThreads   = 4
	MinImportBcryptCost     = bcrypt.MinCost
	MaxImportBcryptCost     = 14
)

// ErrUnknownHash is returned for a stored hash in no supported format.
var ErrUnknownHash = errors.New("secrets: unsupported password hash format")

// ErrHashCost is returned (wrapped, with the bound) for an imported hash
// whose parameters exceed the import bounds.
var ErrHashCost = errors.New("secrets: password hash parameters out of bounds")

// ErrBusy is returned when no hashing slot became free in time: the server
// is overloaded with password checks; the caller should answer "retry".
var ErrBusy = errors.New("secrets: password hashing is busy; retry")

// Every password hash and verification takes a slot, so concurrent logins
// (anonymous ones included) cannot take more memory and CPU than the
// machine has: argon2id needs its memory parameter per running check.
var (
	hashSlots = make(chan struct{}, max(2, runtime.GOMAXPROCS(0)))
	// hashWait bounds the wait for a slot.
	hashWait = 5 * time.Second
	// inFlight counts running hashes (for tests of the bound).
	inFlight atomic.Int32
)

// hashMemory keeps the memory of finished argon2id checks (at the current
// parameters) for the next ones. At most HashConcurrency buffers exist, as
// many as hashes run at once, mapped outside the Go heap: a login then
// allocates nothing, and the collector neither paces on 19 MiB of garbage
// per check (the heap grew to five times the live data, with those
// buffers in it, and RSS to about 300 MB after 1,000 logins) nor zeroes
// fresh pages for it.
var hashMemory = make(chan []byte, cap(hashSlots))

// idKey is argon2.IDKey, in reused memory when the parameters are the
// current ones (the only ones a login runs at, once a hash is rehashed).
func idKey(password, salt []byte, time, memory uint32, threads uint8, keyLen uint32) []byte {
	if memory == argonMemory && threads == argonThreads {
		var mem []byte
		select {
		case mem = <-hashMemory:
		default:
			mem = allocHashMemory(argon2in.MemoryBytes(argonMemory, argonThreads))
		}
		if mem != nil {
			defer func() {
				select {
				case hashMemory <- mem:
				default:
					freeHashMemory(mem)
				}
			}()
			return argon2in.IDKeyIn(mem, password, salt, time, memory, threads, keyLen)
		}
	}
	return argon2.IDKey(password, salt, time, memory, threads, keyLen)
}

// HashConcurrency is the number of password hashes that run at once.
func HashConcurrency() int { return cap(hashSlots) }

// withSlot runs fn in a hashing slot, or returns ErrBusy (or ctx's error)
// when none frees up within hashWait.
func withSlot(ctx context.Context, fn func()) error {
	t := time.NewTimer(hashWait)
	defer t.Stop()
	select {
	case hashSlots <- struct{}{}:
	case <-t.C:
		return ErrBusy
	case <-ctx.Done():
		return ctx.Err()
	}
	inFlight.Add(1)
	defer func() {
		inFlight.Add(-1)
		<-hashSlots
	}()
	if o := observer.Load(); o != nil {
		(*o)(fn)
	} else {
		fn()
	}
	return nil
}

// observer, when set, runs every password hash and verification.
var observer atomic.Pointer[func(fn func())]

// SetObserver makes o run every password hash and verification from now
// on (o must call fn once): the process measures their count and CPU time
// with it (pkg/process), which this package leaves to its caller.
func SetObserver(o func(fn func())) { observer.Store(&o) }

var b64 = base64.RawStdEncoding

// HashPassword returns an argon2id hash in PHC string format, computed in a
// hashing slot (ErrBusy when none frees up in time).
func HashPassword(ctx context.Context, password string) (string, error) {
	salt := make([]byte, argonSaltLen)
	if _, err := rand.Read(salt); err != nil {
		return "", fmt.Errorf("secrets: salt: %w", err)
	}
	var key []byte
	if err := withSlot(ctx, func() {
		key = idKey([]byte(password), salt, argonTime, argonMemory, argonThreads, argonKeyLen)
	}); err != nil {
		return "", err
	}
	return fmt.Sprintf("$argon2id$v=%d$m=%d,t=%d,p=%d$%s$%s",
		argon2.Version, argonMemory, argonTime, argonThreads, b64.EncodeToString(salt), b64.EncodeToString(key)), nil
}

// CheckPasswordHash validates an imported hash (argon2id PHC or bcrypt)
// without a password: its format, and its parameters within the import
// bounds (ErrHashCost, naming the bound).
func CheckPasswordHash(encoded string) error {
	switch {
	case strings.HasPrefix(encoded, "$argon2id$"):
		p, _, _, err := parseArgon2id(encoded)
		if err != nil {
			return err
		}
		switch {
		case p.memory > MaxImportArgonMemoryKiB:
			return fmt.Errorf("%w: argon2id memory m=%d KiB exceeds %d KiB", ErrHashCost, p.memory, MaxImportArgonMemoryKiB)
		case p.time > MaxImportArgonTime:
			return fmt.Errorf("%w: argon2id time t=%d exceeds %d", ErrHashCost, p.time, MaxImportArgonTime)
		case p.threads > MaxImportArgonThreads:
			return fmt.Errorf("%w: argon2id parallelism p=%d exceeds %d", ErrHashCost, p.threads, MaxImportArgonThreads)
		}
		return nil
	case isBcrypt(encoded):
		cost, err := bcrypt.Cost([]byte(encoded))
		if err != nil {
			return fmt.Errorf("%w: %v", ErrUnknownHash, err)
		}
		if !wellFormedBcrypt(encoded) {
			// bcrypt.Cost reads only the prefix: a hash that could never
			// verify must not be imported.
			return fmt.Errorf("%w: not a bcrypt hash ($2a$NN$ and 53 characters of bcrypt's base64)", ErrUnknownHash)
		}
		if cost < MinImportBcryptCost || cost > MaxImportBcryptCost {
			return fmt.Errorf("%w: bcrypt cost %d is outside %d-%d", ErrHashCost, cost, MinImportBcryptCost, MaxImportBcryptCost)
		}
		return nil
	}
	return ErrUnknownHash
}

// VerifyPassword reports whether password matches encoded, computing in a
// hashing slot (ErrBusy when none frees up in time). rehash is true when
// the hash is valid but not in the current format and parameters, so the
// caller should store a fresh HashPassword. A hash stored before the import
// bounds existed may exceed them; it is still verified (in a slot, so the
// bound on concurrency holds) and rehashed at its first success.
func VerifyPassword(ctx context.Context, password, encoded string) (ok, rehash bool, err error) {
	switch {
	case strings.HasPrefix(encoded, "$argon2id$"):
		p, salt, key, err := parseArgon2id(encoded)
		if err != nil {
			return false, false, err
		}
		var got []byte
		if err := withSlot(ctx, func() {
			got = idKey([]byte(password), salt, p.time, p.memory, p.threads, uint32(len(key)))
		}); err != nil {
			return false, false, err
		}
		ok := subtle.ConstantTimeCompare(got, key) == 1
		current := p.time == argonTime && p.memory == argonMemory && p.threads == argonThreads && len(key) == argonKeyLen
		return ok, ok && !current, nil
	case isBcrypt(encoded):
		var cmp error
		if err := withSlot(ctx, func() { cmp = bcrypt.CompareHashAndPassword([]byte(encoded), []byte(password)) }); err != nil {
			return false, false, err
		}
		if errors.Is(cmp, bcrypt.ErrMismatchedHashAndPassword) {
			return false, false, nil
		}
		if cmp != nil {
			return false, false, fmt.Errorf("%w: %v", ErrUnknownHash, cmp)
		}
		return true, true, nil
	}
	return false, false, ErrUnknownHash
}

// wellFormedBcrypt checks the whole modular-crypt form: "$2x$NN$", then
// 22 characters of salt and 31 of hash in bcrypt's base64 alphabet.
func wellFormedBcrypt(s string) bool {
	if len(s) != 60 || s[6] != '$' || s[4] < '0' || s[4] > '9' || s[5] < '0' || s[5] > '9' {
		return false
	}
	for _, c := range s[7:] {
		if !(c == '.' || c == '/' || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9')) {
			return false
		}
	}
	return true
}

func isBcrypt(s string) bool {
	return strings.HasPrefix(s, "$2a$") || strings.HasPrefix(s, "$2b$") || strings.HasPrefix(s, "$2y$")
}

type argonParams struct {
	memory  uint32
	time    uint32
	threads uint8
}

func parseArgon2id(s string) (argonParams, []byte, []byte, error) {
	var p argonParams
	parts := strings.Split(s, "$")
	// "", "argon2id", "v=19", "m=..,t=..,p=..", salt, key
	if len(parts) != 6 {
		return p, nil, nil, fmt.Errorf("%w: malformed argon2id hash", ErrUnknownHash)
	}
	var v int
	if _, err := fmt.Sscanf(parts[2], "v=%d", &v); err != nil || v != argon2.Version {
		return p, nil, nil, fmt.Errorf("%w: unsupported argon2 version", ErrUnknownHash)
	}
	if _, err := fmt.Sscanf(parts[3], "m=%d,t=%d,p=%d", &p.memory, &p.time, &p.threads); err != nil {
		return p, nil, nil, fmt.Errorf("%w: malformed argon2id parameters", ErrUnknownHash)
	}
	// Bound the cost an imported hash can impose on every login.
	if p.memory == 0 || p.memory > 256*1024 || p.time == 0 || p.time > 10 || p.threads == 0 {
		return p, nil, nil, fmt.Errorf("%w: argon2id parameters out of range", ErrUnknownHash)
	}
	salt, err1 := b64.DecodeString(parts[4])
	key, err2 := b64.DecodeString(parts[5])
	if err1 != nil || err2 != nil || len(salt) < 8 || len(key) < 16 {
		return p, nil, nil, fmt.Errorf("%w: malformed argon2id salt or key", ErrUnknownHash)
	}
	return p, salt, key, nil
}
