package dpop

import (
	"context"
	"crypto/sha256"
	"errors"
	"sync"
	"time"
)

// ErrReplayFull is MemoryReplay's answer when it holds Max proofs: the
// proof is refused unchecked for replay (the caller answers 503), never
// accepted.
var ErrReplayFull = errors.New("DPoP replay store full")

// MemoryReplay remembers proofs in this process: the embedded server's
// store, where one process serves every request (its SQLite data has one
// owner). A proof costs a map lookup, not a write. Entries live in two
// generations rotated every Period, so each is kept between Period and
// twice Period, longer than a proof can be accepted (its window and skew).
// What a process held is lost with it: the service snapshots the live
// entries when it closes (Entries) and loads them at its next start
// (Load); after a stop without a snapshot, the verifier refuses proofs
// made before the start (Verifier.NotAfter).
type MemoryReplay struct {
	// Period is the rotation (DefaultReplayPeriod when 0); Max bounds the
	// entries of both generations (DefaultReplayMax when 0).
	Period time.Duration
	Max    int
	Now    func() time.Time

	mu        sync.Mutex
	cur, prev map[[32]byte]int64 // key → until (Unix seconds)
	rotated   time.Time
}

// Defaults of MemoryReplay.
const (
	DefaultReplayPeriod = 75 * time.Second // > the default window (60 s) and skew (5 s)
	DefaultReplayMax    = 1 << 20          // about 64 MiB at most
)

// Entry is one remembered proof.
type Entry struct {
	Key   [32]byte
	Until time.Time
}

func replayKey(jkt, jti string) [32]byte {
	return sha256.Sum256([]byte(jkt + "\x00" + jti))
}

func (m *MemoryReplay) now() time.Time {
	if m.Now != nil {
		return m.Now()
	}
	return time.Now()
}

// rotate drops the older generation once per Period; m.mu is held.
func (m *MemoryReplay) rotate(now time.Time) {
	period := m.Period
	if period <= 0 {
		period = DefaultReplayPeriod
	}
	if m.cur == nil {
		m.cur, m.prev, m.rotated = map[[32]byte]int64{}, map[[32]byte]int64{}, now
	}
	for now.Sub(m.rotated) >= period {
		m.prev, m.cur = m.cur, map[[32]byte]int64{}
		m.rotated = m.rotated.Add(period)
		if now.Sub(m.rotated) >= period { // idle for two periods or more
			m.prev, m.rotated = map[[32]byte]int64{}, now
		}
	}
}

// Use implements ReplayStore.
func (m *MemoryReplay) Use(_ context.Context, jkt, jti string, until time.Time) error {
	k := replayKey(jkt, jti)
	now := m.now()
	m.mu.Lock()
	defer m.mu.Unlock()
	m.rotate(now)
	if u, ok := m.cur[k]; ok && u >= now.Unix() {
		return ErrReplayed
	}
	if u, ok := m.prev[k]; ok && u >= now.Unix() {
		return ErrReplayed
	}
	limit := m.Max
	if limit <= 0 {
		limit = DefaultReplayMax
	}
	if len(m.cur)+len(m.prev) >= limit {
		return ErrReplayFull
	}
	m.cur[k] = until.Unix()
	return nil
}

// Entries are the proofs still remembered at now, for a snapshot.
func (m *MemoryReplay) Entries() []Entry {
	now := m.now().Unix()
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]Entry, 0, len(m.cur)+len(m.prev))
	for _, gen := range []map[[32]byte]int64{m.prev, m.cur} {
		for k, u := range gen {
			if u >= now {
				out = append(out, Entry{Key: k, Until: time.Unix(u, 0)})
			}
		}
	}
	return out
}

// Load remembers the entries of a snapshot that have not expired.
func (m *MemoryReplay) Load(entries []Entry) {
	now := m.now()
	m.mu.Lock()
	defer m.mu.Unlock()
	m.rotate(now)
	for _, e := range entries {
		if !e.Until.Before(now) {
			m.cur[e.Key] = e.Until.Unix()
		}
	}
}
