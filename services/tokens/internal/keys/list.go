package keys

import (
	"context"
	"fmt"
	"time"
)

// State is where a key is in its lifecycle.
type State int

// Key states, in lifecycle order.
const (
	// StateScheduled: created_at is in the future (only seen with clock
	// differences between replicas).
	StateScheduled State = iota + 1
	// StatePublished: in the key set, not yet signing.
	StatePublished
	// StateActive: signing new tokens.
	StateActive
	// StateRetired: no longer signing, still in the key set until ExpiresAt.
	StateRetired
)

func (s State) String() string {
	switch s {
	case StateScheduled:
		return "scheduled"
	case StatePublished:
		return "published"
	case StateActive:
		return "active"
	case StateRetired:
		return "retired"
	}
	return "unknown"
}

// KeyInfo describes a key without its key material.
type KeyInfo struct {
	ID         string
	Algorithm  string
	Generation int64
	State      State
	CreatedAt  time.Time // published from then on
	SignFrom   time.Time
	// RetireAt and ExpiresAt are zero until a successor is scheduled.
	RetireAt  time.Time
	ExpiresAt time.Time
}

// List returns the keys that are published or scheduled, newest first, as
// the table holds them now (not the possibly older snapshot).
func (m *Manager) List(ctx context.Context) ([]KeyInfo, error) {
	rows, err := selectRows(ctx, m.db)
	if err != nil {
		return nil, fmt.Errorf("keys: %w", err)
	}
	now := m.o.Now()
	out := make([]KeyInfo, 0, len(rows))
	for i := range rows {
		r := &rows[i]
		if r.ExpiresAt != nil && !now.Before(*r.ExpiresAt) {
			continue
		}
		out = append(out, info(r, now))
	}
	return out, nil
}

func info(r *row, now time.Time) KeyInfo {
	k := KeyInfo{ID: r.ID, Algorithm: r.Algorithm, Generation: r.Generation, CreatedAt: r.CreatedAt, SignFrom: r.SignFrom}
	if r.RetireAt != nil {
		k.RetireAt = *r.RetireAt
	}
	if r.ExpiresAt != nil {
		k.ExpiresAt = *r.ExpiresAt
	}
	switch {
	case now.Before(k.CreatedAt):
		k.State = StateScheduled
	case now.Before(k.SignFrom):
		k.State = StatePublished
	case k.RetireAt.IsZero() || now.Before(k.RetireAt):
		k.State = StateActive
	default:
		k.State = StateRetired
	}
	return k
}
