package secrets

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"strconv"
	"sync"
	"time"
)

// RandomToken returns n random bytes, base64url-encoded without padding.
// 32 bytes (256 bits) is the size of every opaque token Gatehouse issues.
func RandomToken(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (Go 1.24+)
	return base64.RawURLEncoding.EncodeToString(b)
}

// OrderedTokenLen is the length of a NewOrderedToken.
const OrderedTokenLen = 51

// orderedTimeBytes is an ordered token's time prefix: 48 bits of Unix
// milliseconds, the token's first 8 base64url characters.
const orderedTimeBytes = 6

// NewOrderedToken returns an opaque token: 6 bytes of its creation time
// (Unix milliseconds) then 32 random bytes, in base64url (OrderedTokenLen
// characters). Hasher.TokenKey keys its record by that time first, so
// records written together sit together in the index on the key: a random
// key would dirty a random page of a large index on every insert. The time
// tells a holder no more than a JWT's iat; the 256 random bits are the
// secret.
func NewOrderedToken() string {
	var b [orderedTimeBytes + 32]byte
	putMillis(b[:orderedTimeBytes], time.Now())
	_, _ = rand.Read(b[orderedTimeBytes:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}

func putMillis(b []byte, t time.Time) {
	ms := uint64(t.UnixMilli())
	for i := len(b) - 1; i >= 0; i-- {
		b[i] = byte(ms)
		ms >>= 8
	}
}

// idEpoch is the start of the id clock (2024-01-01T00:00:00Z).
var idEpoch = time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)

// Id layout (63 bits, like ZITADEL's and Twitter's snowflake ids): 41 bits
// of milliseconds since idEpoch, a 10-bit node number drawn at random when
// the process starts, and a 12-bit sequence within the millisecond.
const (
	idSeqBits  = 12
	idNodeBits = 10
	idMaxSeq   = 1<<idSeqBits - 1
)

var ids = struct {
	sync.Mutex
	node uint64
	ms   uint64 // of the last id
	seq  uint64
}{node: randomUint64() & (1<<idNodeBits - 1)}

// NewID returns a new resource id: the decimal string of a 63-bit number
// that sorts by creation time. Ids of one process never repeat: the
// sequence orders ids within a millisecond, and a process that uses up a
// millisecond's 4096 ids, or whose clock steps back, counts on from the
// last millisecond it used. Two processes collide only if they drew the same
// node number and issue the same sequence number in the same millisecond;
// tables keyed by ids refuse such a duplicate. Values that must never
// collide across processes without a database to refuse them (token ids)
// use NewTokenID.
func NewID() string {
	now := uint64(time.Since(idEpoch).Milliseconds()) & (1<<41 - 1)
	ids.Lock()
	switch {
	case now > ids.ms:
		ids.ms, ids.seq = now, 0
	case ids.seq < idMaxSeq:
		ids.seq++
	default: // this millisecond's ids are used up: borrow the next one
		ids.ms, ids.seq = ids.ms+1, 0
	}
	n := ids.ms<<(idNodeBits+idSeqBits) | ids.node<<idSeqBits | ids.seq
	ids.Unlock()
	return strconv.FormatUint(n, 10)
}

// NewTokenID returns the id (jti) of a token or token record, unique across
// every process without coordination: 48 bits of milliseconds since the Unix
// epoch then 80 random bits, in hex. The time prefix keeps inserts into
// indexes on the id near each other (a random key would dirty a random
// page of the index on every insert).
func NewTokenID() string {
	var b [16]byte
	_, _ = rand.Read(b[6:])
	putMillis(b[:6], time.Now())
	return hex.EncodeToString(b[:])
}

func randomUint64() uint64 {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return binary.BigEndian.Uint64(b[:])
}
