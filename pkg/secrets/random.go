package secrets

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"strconv"
	"time"
)

// RandomToken returns n random bytes, base64url-encoded without padding.
// 32 bytes (256 bits) is the size of every opaque token Gatehouse issues.
func RandomToken(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (Go 1.24+)
	return base64.RawURLEncoding.EncodeToString(b)
}

// idEpoch is the start of the id clock (2024-01-01T00:00:00Z).
var idEpoch = time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)

// NewID returns a new resource id: a decimal string of a 63-bit number whose
// high 41 bits are milliseconds since 2024 and low 22 bits random, so ids
// sort roughly by creation time (like ZITADEL's numeric ids).
func NewID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	ms := uint64(time.Since(idEpoch).Milliseconds()) & (1<<41 - 1)
	n := ms<<22 | binary.BigEndian.Uint64(b[:])&(1<<22-1)
	return strconv.FormatUint(n, 10)
}
