package internalapi

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/gatehouse-id/gatehouse/pkg/db"
)

// Lockout policy. A user is locked for UserLockDuration after the org's
// lockout_max_attempts consecutive failures; a client address after
// AddressMaxFailures failures within AddressWindow. Counts live in the
// database, so a restart does not reset them.
const (
	UserLockDuration   = 15 * time.Minute
	AddressMaxFailures = 20
	AddressWindow      = 15 * time.Minute
	AddressLockTime    = 15 * time.Minute
)

// lockouts reads and updates login_failures.
type lockouts struct {
	db  *db.DB
	now func() time.Time
}

type failureRow struct {
	Failures    int        `db:"failures"`
	LockedUntil *time.Time `db:"locked_until"`
	UpdatedAt   time.Time  `db:"updated_at"`
}

// lockedUntil returns when subject's lock ends, or zero when not locked.
func (l *lockouts) lockedUntil(ctx context.Context, subject string) (time.Time, error) {
	var r failureRow
	err := l.db.Get(ctx, &r, `SELECT failures, locked_until, updated_at FROM login_failures WHERE subject = ?`, subject)
	if errors.Is(err, sql.ErrNoRows) {
		return time.Time{}, nil
	}
	if err != nil {
		return time.Time{}, fmt.Errorf("read login failures: %w", err)
	}
	if r.LockedUntil != nil && l.now().Before(*r.LockedUntil) {
		return *r.LockedUntil, nil
	}
	return time.Time{}, nil
}

// fail records a failure of subject; after max failures (counted within
// window of the previous one; window 0 = consecutive, never expiring) the
// subject is locked for lock. It reports whether the subject is now locked.
func (l *lockouts) fail(ctx context.Context, subject string, max int, window, lock time.Duration) (bool, error) {
	now := l.now().UTC()
	locked := false
	err := l.db.InTx(ctx, func(tx *db.Tx) error {
		var r failureRow
		err := tx.Get(ctx, &r, `SELECT failures, locked_until, updated_at FROM login_failures WHERE subject = ?`, subject)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			r = failureRow{}
		case err != nil:
			return err
		}
		expired := r.LockedUntil != nil && !now.Before(*r.LockedUntil)
		if expired || (window > 0 && now.Sub(r.UpdatedAt) > window) {
			r.Failures = 0 // a served lock or a quiet window starts afresh
		}
		r.Failures++
		var until *time.Time
		if r.Failures >= max {
			t := now.Add(lock)
			until, locked = &t, true
		}
		_, err = tx.Exec(ctx, `INSERT INTO login_failures (subject, failures, locked_until, updated_at) VALUES (?, ?, ?, ?)
			ON CONFLICT (subject) DO UPDATE SET failures = excluded.failures, locked_until = excluded.locked_until,
			updated_at = excluded.updated_at`, subject, r.Failures, until, now)
		return err
	})
	return locked, err
}

// reset clears subject's failures after a successful login.
func (l *lockouts) reset(ctx context.Context, subject string) error {
	_, err := l.db.Exec(ctx, `DELETE FROM login_failures WHERE subject = ?`, subject)
	return err
}
