package dpop

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"time"
)

// DefaultNoncePeriod is how long a server nonce is current; one is
// accepted in its period and the next.
const DefaultNoncePeriod = 5 * time.Minute

// Nonces makes and checks server nonces (RFC 9449 §8) without state: a
// nonce is a period's number and its HMAC under Key, which every replica
// derives from the master key, so any replica accepts another's nonce.
type Nonces struct {
	Key    []byte
	Period time.Duration // DefaultNoncePeriod when 0
	Now    func() time.Time
}

func (n *Nonces) period() int64 {
	p := n.Period
	if p <= 0 {
		p = DefaultNoncePeriod
	}
	now := time.Now
	if n.Now != nil {
		now = n.Now
	}
	return now().UnixNano() / int64(p)
}

func (n *Nonces) make(period int64) string {
	var b [8 + 16]byte
	binary.BigEndian.PutUint64(b[:8], uint64(period))
	m := hmac.New(sha256.New, n.Key)
	m.Write([]byte("gatehouse dpop nonce\x00"))
	m.Write(b[:8])
	copy(b[8:], m.Sum(nil))
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// Current is the nonce to send in DPoP-Nonce.
func (n *Nonces) Current() string { return n.make(n.period()) }

// Valid reports whether s is the current nonce or the previous period's.
func (n *Nonces) Valid(s string) bool {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || len(b) != 24 {
		return false
	}
	p := int64(binary.BigEndian.Uint64(b[:8]))
	cur := n.period()
	if p != cur && p != cur-1 {
		return false
	}
	return hmac.Equal([]byte(n.make(p)), []byte(s))
}
