package secrets

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/crypto/argon2"
	"golang.org/x/crypto/bcrypt"
)

// Argon2id parameters (OWASP's second recommended set: 19 MiB, 2 passes).
const (
	argonMemory  = 19 * 1024
	argonTime    = 2
	argonThreads = 1
	argonKeyLen  = 32
	argonSaltLen = 16
)

// Bounds on imported hashes. The parameters of a stored hash set the cost
// of every login attempt against it, anonymous ones included (a wrong
// password costs as much as the right one), so an import may not choose
// them freely: ImportHumanUser refuses a hash beyond them (InvalidArgument
// naming the bound). They lie above OWASP's strongest argon2id set (46 MiB)
// and bcrypt's usual 10-12; at the first successful login such a hash is
// rehashed to the current parameters anyway. At most HashConcurrency hashes
// of at most MaxImportArgonMemoryKiB each run at once, which bounds the
// memory that password checks take.
const (
	MaxImportArgonMemoryKiB = 64 * 1024 // argon2id m, in KiB (64 MiB)
	MaxImportArgonTime      = 4         // argon2id t (passes)
	MaxImportArgonThreads   = 4         // argon2id p (lanes)
	MinImportBcryptCost     = bcrypt.MinCost
	MaxImportBcryptCost     = 14 // about a second per check
)

// Ceiling on stored hashes. Before the import bounds existed, an import
// could store argon2id hashes up to 256 MiB and 10 passes and bcrypt hashes
// of any cost up to 31. Such a hash is still verified at login when it is
// within this ceiling, but in a hashing slot and one at a time server-wide
// (so it can neither starve ordinary logins nor multiply its memory), and
// rehashed at its first success. Beyond it (bcrypt cost 17 takes over 7
// seconds, cost 31 days) no one could wait for the check: VerifyPassword
// refuses it at once with ErrHashCost, holding no slot, and the user needs
// a new password (an administrator's reset).
const (
	MaxStoredArgonMemoryKiB = 256 * 1024
	MaxStoredArgonTime      = 10
	MaxStoredBcryptCost     = 16
)

// ErrUnknownHash is returned for a hash in no supported format (a
// malformed PHC string or bcrypt encoding included).
var ErrUnknownHash = errors.New("secrets: unsupported password hash format")

// ErrHashCost is returned (wrapped, naming the bound) for an imported hash
// whose parameters exceed the import bounds, and for a stored hash beyond
// the ceiling of what is verified.
var ErrHashCost = errors.New("secrets: password hash parameters out of bounds")

// ErrBusy is returned when no hashing slot became free in time: the server
// is overloaded with password checks; the caller should answer "retry"
// (Unavailable), never "wrong password".
var ErrBusy = errors.New("secrets: password hashing is busy; retry")

// defaultHashWait bounds the wait for a hashing slot.
const defaultHashWait = 5 * time.Second

// Every password hash and verification takes a slot, so concurrent logins
// (anonymous ones included) cannot take more memory and CPU than the
// machine has: argon2id needs its memory parameter per running check.
var (
	hashSlots = make(chan struct{}, max(2, runtime.GOMAXPROCS(0)))
	// heavySlots admits one check at a time of a stored hash beyond the
	// import bounds (taken before, and in addition to, a hashSlots slot).
	heavySlots = make(chan struct{}, 1)
	// hashWaitNs bounds the wait for a slot (Saturate changes it).
	hashWaitNs atomic.Int64
	// inFlight counts running hashes (for tests of the bound).
	inFlight atomic.Int32
	// testHookInSlot, when set by a test, runs in every slot with the
	// number of hashes running.
	testHookInSlot func(inFlight int32)
)

func init() { hashWaitNs.Store(int64(defaultHashWait)) }

func hashWait() time.Duration     { return time.Duration(hashWaitNs.Load()) }
func setHashWait(d time.Duration) { hashWaitNs.Store(int64(d)) }

// HashConcurrency is the number of password hashes that run at once,
// process-wide: max(2, GOMAXPROCS).
func HashConcurrency() int { return cap(hashSlots) }

// Saturate takes every hashing slot (waiting for running hashes to end) and
// makes the wait for a slot wait long, until release is called: it lets
// tests of callers see how they answer an overloaded server. Not for
// production code.
func Saturate(wait time.Duration) (release func()) {
	for range cap(hashSlots) {
		hashSlots <- struct{}{}
	}
	old := hashWait()
	setHashWait(wait)
	var once sync.Once
	return func() {
		once.Do(func() {
			setHashWait(old)
			for range cap(hashSlots) {
				<-hashSlots
			}
		})
	}
}

// withSlot runs fn in a hashing slot (and, for heavy, in the single lane for
// over-bound stored hashes first), or returns ErrBusy when none frees up
// within the wait bound, or ctx's error when ctx ends first.
func withSlot(ctx context.Context, heavy bool, fn func()) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	t := time.NewTimer(hashWait())
	defer t.Stop()
	acquire := func(slots chan struct{}) error {
		select {
		case slots <- struct{}{}:
			return nil
		case <-t.C:
			return ErrBusy
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if heavy {
		if err := acquire(heavySlots); err != nil {
			return err
		}
		defer func() { <-heavySlots }()
	}
	if err := acquire(hashSlots); err != nil {
		return err
	}
	n := inFlight.Add(1)
	defer func() {
		inFlight.Add(-1)
		<-hashSlots
	}()
	if h := testHookInSlot; h != nil {
		h(n)
	}
	fn()
	return nil
}

var b64 = base64.RawStdEncoding

// HashPassword returns an argon2id hash in PHC string format with the
// current parameters, computed in a hashing slot (ErrBusy when none frees
// up in time).
func HashPassword(ctx context.Context, password string) (string, error) {
	salt := make([]byte, argonSaltLen)
	if _, err := rand.Read(salt); err != nil {
		return "", fmt.Errorf("secrets: salt: %w", err)
	}
	var key []byte
	if err := withSlot(ctx, false, func() {
		key = argon2.IDKey([]byte(password), salt, argonTime, argonMemory, argonThreads, argonKeyLen)
	}); err != nil {
		return "", err
	}
	return fmt.Sprintf("$argon2id$v=%d$m=%d,t=%d,p=%d$%s$%s",
		argon2.Version, argonMemory, argonTime, argonThreads, b64.EncodeToString(salt), b64.EncodeToString(key)), nil
}

// CheckPasswordHash validates an imported hash (argon2id in PHC string
// format, or bcrypt $2a$/$2b$/$2y$) without a password: its format
// (ErrUnknownHash), and its parameters within the import bounds
// (ErrHashCost, naming the bound).
func CheckPasswordHash(encoded string) error {
	h, err := parseHash(encoded)
	if err != nil {
		return err
	}
	return h.withinImportBounds()
}

// VerifyPassword reports whether password matches encoded, computing in a
// hashing slot (ErrBusy when none frees up in time, ctx's error when ctx
// ends while waiting). rehash is true when the password matched but the
// hash is not in the current format and parameters, so the caller should
// store a fresh HashPassword. A stored hash beyond the import bounds (from
// before they existed) is verified only within the stored ceiling, one at
// a time; beyond the ceiling it is ErrHashCost, unverified.
func VerifyPassword(ctx context.Context, password, encoded string) (ok, rehash bool, err error) {
	h, err := parseHash(encoded)
	if err != nil {
		return false, false, err
	}
	if err := h.withinStoredCeiling(); err != nil {
		return false, false, err
	}
	heavy := h.withinImportBounds() != nil
	if h.bcrypt {
		var cmp error
		if err := withSlot(ctx, heavy, func() { cmp = bcrypt.CompareHashAndPassword([]byte(encoded), []byte(password)) }); err != nil {
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
	p := h.argon
	var got []byte
	if err := withSlot(ctx, heavy, func() {
		got = argon2.IDKey([]byte(password), h.salt, p.time, p.memory, p.threads, uint32(len(h.key)))
	}); err != nil {
		return false, false, err
	}
	ok = subtle.ConstantTimeCompare(got, h.key) == 1
	current := p.time == argonTime && p.memory == argonMemory && p.threads == argonThreads &&
		len(h.key) == argonKeyLen && len(h.salt) == argonSaltLen
	return ok, ok && !current, nil
}

// parsedHash is a stored or imported password hash, well-formed.
type parsedHash struct {
	bcrypt     bool
	bcryptCost int
	argon      argonParams
	salt, key  []byte
}

type argonParams struct {
	memory  uint32
	time    uint32
	threads uint8
}

func (h parsedHash) withinImportBounds() error {
	if h.bcrypt {
		if h.bcryptCost < MinImportBcryptCost || h.bcryptCost > MaxImportBcryptCost {
			return fmt.Errorf("%w: bcrypt cost %d is outside %d-%d", ErrHashCost, h.bcryptCost, MinImportBcryptCost, MaxImportBcryptCost)
		}
		return nil
	}
	switch p := h.argon; {
	case p.memory > MaxImportArgonMemoryKiB:
		return fmt.Errorf("%w: argon2id memory m=%d KiB exceeds %d KiB", ErrHashCost, p.memory, MaxImportArgonMemoryKiB)
	case p.time > MaxImportArgonTime:
		return fmt.Errorf("%w: argon2id time t=%d exceeds %d", ErrHashCost, p.time, MaxImportArgonTime)
	case p.threads > MaxImportArgonThreads:
		return fmt.Errorf("%w: argon2id parallelism p=%d exceeds %d", ErrHashCost, p.threads, MaxImportArgonThreads)
	}
	return nil
}

func (h parsedHash) withinStoredCeiling() error {
	if h.bcrypt {
		if h.bcryptCost < bcrypt.MinCost || h.bcryptCost > MaxStoredBcryptCost {
			return fmt.Errorf("%w: stored bcrypt cost %d is outside %d-%d, not verified", ErrHashCost, h.bcryptCost, bcrypt.MinCost, MaxStoredBcryptCost)
		}
		return nil
	}
	switch p := h.argon; {
	case p.memory > MaxStoredArgonMemoryKiB:
		return fmt.Errorf("%w: stored argon2id memory m=%d KiB exceeds %d KiB, not verified", ErrHashCost, p.memory, MaxStoredArgonMemoryKiB)
	case p.time > MaxStoredArgonTime:
		return fmt.Errorf("%w: stored argon2id time t=%d exceeds %d, not verified", ErrHashCost, p.time, MaxStoredArgonTime)
	}
	return nil
}

// parseHash parses an argon2id PHC string or a bcrypt hash strictly: the
// whole string, no unknown fields, no signs, spaces or leading zeros.
func parseHash(s string) (parsedHash, error) {
	switch {
	case strings.HasPrefix(s, "$argon2id$"):
		return parseArgon2id(s)
	case strings.HasPrefix(s, "$2a$"), strings.HasPrefix(s, "$2b$"), strings.HasPrefix(s, "$2y$"):
		return parseBcrypt(s)
	}
	return parsedHash{}, ErrUnknownHash
}

// bcryptAlphabet is bcrypt's base64 alphabet.
const bcryptAlphabet = "./ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"

// parseBcrypt accepts exactly "$2?$" + two-digit cost + "$" + 53 characters
// of bcrypt's alphabet (22 of salt, 31 of hash).
func parseBcrypt(s string) (parsedHash, error) {
	if len(s) != 60 || s[6] != '$' || !isDigit(s[4]) || !isDigit(s[5]) {
		return parsedHash{}, fmt.Errorf("%w: malformed bcrypt hash", ErrUnknownHash)
	}
	for i := 7; i < len(s); i++ {
		if strings.IndexByte(bcryptAlphabet, s[i]) < 0 {
			return parsedHash{}, fmt.Errorf("%w: malformed bcrypt hash", ErrUnknownHash)
		}
	}
	return parsedHash{bcrypt: true, bcryptCost: int(s[4]-'0')*10 + int(s[5]-'0')}, nil
}

// parseArgon2id accepts exactly
// "$argon2id$v=19$m=<m>,t=<t>,p=<p>$<salt>$<key>" with decimal parameters
// (m, t ≥ 1; 1 ≤ p ≤ 255), unpadded standard base64, a salt of at least 8
// bytes and a key of at least 16.
func parseArgon2id(s string) (parsedHash, error) {
	malformed := func(what string) (parsedHash, error) {
		return parsedHash{}, fmt.Errorf("%w: malformed argon2id hash (%s)", ErrUnknownHash, what)
	}
	parts := strings.Split(s, "$")
	// "", "argon2id", "v=19", "m=..,t=..,p=..", salt, key
	if len(parts) != 6 {
		return malformed("want $argon2id$v=19$m=..,t=..,p=..$salt$key")
	}
	if parts[2] != fmt.Sprintf("v=%d", argon2.Version) {
		return malformed("version must be v=19")
	}
	fields := strings.Split(parts[3], ",")
	if len(fields) != 3 {
		return malformed("parameters must be m, t and p")
	}
	var vals [3]uint64
	for i, name := range []string{"m", "t", "p"} {
		v, ok := strings.CutPrefix(fields[i], name+"=")
		n, err := strconv.ParseUint(v, 10, 32)
		if !ok || err != nil || n == 0 || !isDecimal(v) {
			return malformed("parameter " + name + " must be a positive decimal number")
		}
		vals[i] = n
	}
	if vals[2] > 255 {
		return malformed("parameter p must be at most 255")
	}
	h := parsedHash{argon: argonParams{memory: uint32(vals[0]), time: uint32(vals[1]), threads: uint8(vals[2])}}
	var err1, err2 error
	h.salt, err1 = b64.DecodeString(parts[4])
	h.key, err2 = b64.DecodeString(parts[5])
	if err1 != nil || err2 != nil || len(h.salt) < 8 || len(h.key) < 16 {
		return malformed("salt or key")
	}
	return h, nil
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// isDecimal: digits only, no leading zero.
func isDecimal(s string) bool {
	if s == "" || (s[0] == '0' && len(s) > 1) {
		return false
	}
	for i := range len(s) {
		if !isDigit(s[i]) {
			return false
		}
	}
	return true
}
