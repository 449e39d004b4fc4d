package secrets

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"

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

// ErrUnknownHash is returned for a stored hash in no supported format.
var ErrUnknownHash = errors.New("secrets: unsupported password hash format")

var b64 = base64.RawStdEncoding

// HashPassword returns an argon2id hash in PHC string format.
func HashPassword(password string) (string, error) {
	salt := make([]byte, argonSaltLen)
	if _, err := rand.Read(salt); err != nil {
		return "", fmt.Errorf("secrets: salt: %w", err)
	}
	key := argon2.IDKey([]byte(password), salt, argonTime, argonMemory, argonThreads, argonKeyLen)
	return fmt.Sprintf("$argon2id$v=%d$m=%d,t=%d,p=%d$%s$%s",
		argon2.Version, argonMemory, argonTime, argonThreads, b64.EncodeToString(salt), b64.EncodeToString(key)), nil
}

// CheckPasswordHash validates the format of an imported hash (argon2id PHC or
// bcrypt) without a password.
func CheckPasswordHash(encoded string) error {
	switch {
	case strings.HasPrefix(encoded, "$argon2id$"):
		_, _, _, err := parseArgon2id(encoded)
		return err
	case isBcrypt(encoded):
		if _, err := bcrypt.Cost([]byte(encoded)); err != nil {
			return fmt.Errorf("%w: %v", ErrUnknownHash, err)
		}
		return nil
	}
	return ErrUnknownHash
}

// VerifyPassword reports whether password matches encoded. rehash is true
// when the hash is valid but not in the current format and parameters, so
// the caller should store a fresh HashPassword.
func VerifyPassword(password, encoded string) (ok, rehash bool, err error) {
	switch {
	case strings.HasPrefix(encoded, "$argon2id$"):
		p, salt, key, err := parseArgon2id(encoded)
		if err != nil {
			return false, false, err
		}
		got := argon2.IDKey([]byte(password), salt, p.time, p.memory, p.threads, uint32(len(key)))
		ok := subtle.ConstantTimeCompare(got, key) == 1
		current := p.time == argonTime && p.memory == argonMemory && p.threads == argonThreads && len(key) == argonKeyLen
		return ok, ok && !current, nil
	case isBcrypt(encoded):
		err := bcrypt.CompareHashAndPassword([]byte(encoded), []byte(password))
		if errors.Is(err, bcrypt.ErrMismatchedHashAndPassword) {
			return false, false, nil
		}
		if err != nil {
			return false, false, fmt.Errorf("%w: %v", ErrUnknownHash, err)
		}
		return true, true, nil
	}
	return false, false, ErrUnknownHash
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
