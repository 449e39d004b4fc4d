package keys

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/gatehouse-id/gatehouse/pkg/db"
)

// row is one signing_keys row.
type row struct {
	ID         string     `db:"id"`
	Algorithm  string     `db:"algorithm"`
	PrivateKey []byte     `db:"private_key"`
	PublicJWK  string     `db:"public_jwk"`
	CreatedAt  time.Time  `db:"created_at"`
	SignFrom   time.Time  `db:"sign_from"`
	RetireAt   *time.Time `db:"retire_at"`
	ExpiresAt  *time.Time `db:"expires_at"`
	Generation int64      `db:"generation"`
}

const selectColumns = `SELECT id, algorithm, private_key, public_jwk, created_at, sign_from, retire_at, expires_at, generation FROM signing_keys`

// selectRows returns every key, newest (highest generation) first.
func selectRows(ctx context.Context, q db.Querier) ([]row, error) {
	var rows []row
	if err := q.Select(ctx, &rows, selectColumns+` ORDER BY generation DESC`); err != nil {
		return nil, fmt.Errorf("load signing keys: %w", err)
	}
	return rows, nil
}

// latestRow returns the key with the highest generation, or nil on an
// empty table.
func latestRow(ctx context.Context, q db.Querier) (*row, error) {
	var r row
	err := q.Get(ctx, &r, selectColumns+` ORDER BY generation DESC LIMIT 1`)
	if errors.Is(db.NotFound(err), db.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("load newest signing key: %w", err)
	}
	return &r, nil
}

// insertRow adds a key; a taken generation (a concurrent rotation won) or
// id is db.ErrConflict.
func insertRow(ctx context.Context, q db.Querier, r *row) error {
	_, err := q.Exec(ctx, `INSERT INTO signing_keys
		(id, algorithm, private_key, public_jwk, created_at, sign_from, retire_at, expires_at, generation)
		VALUES (?, ?, ?, ?, ?, ?, NULL, NULL, ?)`,
		r.ID, r.Algorithm, r.PrivateKey, r.PublicJWK, r.CreatedAt, r.SignFrom, r.Generation)
	if err != nil {
		return fmt.Errorf("insert signing key: %w", db.Conflict(err))
	}
	return nil
}

// scheduleRetirement records when a key stops signing and leaves the key set.
func scheduleRetirement(ctx context.Context, q db.Querier, id string, retireAt, expiresAt time.Time) error {
	if _, err := q.Exec(ctx, `UPDATE signing_keys SET retire_at = ?, expires_at = ? WHERE id = ?`,
		retireAt, expiresAt, id); err != nil {
		return fmt.Errorf("schedule retirement of signing key %s: %w", id, err)
	}
	return nil
}

// deleteExpired removes keys that have left the key set.
func deleteExpired(ctx context.Context, q db.Querier, now time.Time) (int64, error) {
	res, err := q.Exec(ctx, `DELETE FROM signing_keys WHERE expires_at IS NOT NULL AND expires_at <= ?`, now)
	if err != nil {
		return 0, fmt.Errorf("delete expired signing keys: %w", err)
	}
	n, _ := res.RowsAffected()
	return n, nil
}
