package revocation

import (
	"context"
	"sync"
	"time"
)

// memList is the in-process list: id -> expiry in Unix microseconds.
type memList struct {
	max int

	mu sync.RWMutex
	m  map[string]int64
	// complete: m holds every unexpired row of the table (set by a load
	// that saw no overflow). overflow: an entry was dropped for room
	// since the last load began.
	complete bool
	overflow bool
}

func newMemList(max int) *memList {
	return &memList{max: max, m: make(map[string]int64)}
}

// lookup reports the entry's expiry, and whether a miss may be trusted.
func (m *memList) lookup(id string) (exp int64, found, complete bool) {
	m.mu.RLock()
	exp, found = m.m[id]
	complete = m.complete
	m.mu.RUnlock()
	return exp, found, complete
}

// add records es (keeping the later expiry of an id already present). When
// the map is full it drops expired entries once; if there is still no room
// the entry is not kept and the list stops trusting misses until a load
// fits again.
func (m *memList) add(es []entry, now time.Time) {
	nowUS := now.UnixMicro()
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, e := range es {
		exp := e.ExpiresAt.UnixMicro()
		if exp <= nowUS {
			continue
		}
		if cur, ok := m.m[e.ID]; ok {
			if exp > cur {
				m.m[e.ID] = exp
			}
			continue
		}
		if len(m.m) >= m.max && !m.overflow {
			m.sweepLocked(nowUS)
		}
		if len(m.m) >= m.max {
			// Once overflowing, skip further sweeps: Prune sweeps and reloads.
			m.overflow, m.complete = true, false
			continue
		}
		m.m[e.ID] = exp
	}
}

func (m *memList) sweepLocked(nowUS int64) {
	for id, exp := range m.m {
		if exp <= nowUS {
			delete(m.m, id)
		}
	}
}

// sweep drops expired entries.
func (m *memList) sweep(now time.Time) {
	m.mu.Lock()
	m.sweepLocked(now.UnixMicro())
	m.mu.Unlock()
}

// needsLoad reports whether misses are not yet trusted.
func (m *memList) needsLoad() bool {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return !m.complete
}

// load merges every unexpired row of the table (read by each) into the map
// and trusts misses afterwards if everything fitted. Revocations recorded
// concurrently are added by their own Revoke, so merging is enough.
func (m *memList) load(ctx context.Context, now time.Time, each func(func([]entry) error) error) error {
	m.mu.Lock()
	m.sweepLocked(now.UnixMicro())
	m.overflow = false
	m.mu.Unlock()
	if err := each(func(page []entry) error {
		m.add(page, now)
		return ctx.Err()
	}); err != nil {
		return err
	}
	m.mu.Lock()
	m.complete = !m.overflow
	m.mu.Unlock()
	return nil
}
