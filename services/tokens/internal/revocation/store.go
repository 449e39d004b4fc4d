package revocation

import (
	"context"
	"fmt"
	"time"

	"github.com/gatehouse-id/gatehouse/pkg/db"
)

// pageSize bounds the rows read (and pushed) at once by a load or sync.
const pageSize = 1000

// entry is one revocation row.
type entry struct {
	ID        string    `db:"token_id"`
	ExpiresAt time.Time `db:"expires_at"`
}

// The upsert keeps the later expiry, so revoking twice never shortens a
// revocation, and returns the expiry the row now holds.
const (
	qInsert = `INSERT INTO revoked_tokens (token_id, expires_at, revoked_at, pending) VALUES (?, ?, ?, ?)
ON CONFLICT (token_id) DO UPDATE SET
  expires_at = CASE WHEN excluded.expires_at > revoked_tokens.expires_at THEN excluded.expires_at ELSE revoked_tokens.expires_at END,
  pending = excluded.pending
RETURNING expires_at`
	qIsRevoked    = `SELECT expires_at FROM revoked_tokens WHERE token_id = ? AND expires_at > ?`
	qUnexpired    = `SELECT token_id, expires_at FROM revoked_tokens WHERE expires_at > ? AND token_id > ? ORDER BY token_id LIMIT 1000`
	qPending      = `SELECT token_id, expires_at FROM revoked_tokens WHERE pending = TRUE AND token_id > ? ORDER BY token_id LIMIT 1000`
	qClearPending = `UPDATE revoked_tokens SET pending = FALSE WHERE token_id = ? AND expires_at = ? AND pending = TRUE`
)

// pruneStep deletes revocations of tokens that have expired: an expired
// token fails on its own.
var pruneStep = db.PruneStep{
	Table: "revoked_tokens",
	Query: `DELETE FROM revoked_tokens WHERE token_id IN (SELECT token_id FROM revoked_tokens WHERE expires_at <= ? LIMIT ` + db.Batch + `)`,
	Args:  func(now time.Time) []any { return []any{now} },
}

// insert records es in one transaction and returns each row's resulting
// expiry, in order.
func insert(ctx context.Context, store *db.DB, es []entry, now time.Time, pending bool) ([]entry, error) {
	out := make([]entry, len(es))
	err := store.InTx(ctx, func(tx *db.Tx) error {
		for i, e := range es {
			out[i].ID = e.ID
			if err := tx.Get(ctx, &out[i].ExpiresAt, qInsert, e.ID, e.ExpiresAt, now, pending); err != nil {
				return fmt.Errorf("revocation: record %d of %d: %w", i+1, len(es), err)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// revokedInDB answers a check from the table: the unexpired revocation's
// expiry in Unix µs, or 0.
func revokedInDB(ctx context.Context, q db.Querier, id string, now time.Time) (int64, error) {
	var exp []time.Time
	if err := q.Select(ctx, &exp, qIsRevoked, id, now); err != nil {
		return 0, fmt.Errorf("revocation: look up token in database: %w", err)
	}
	if len(exp) == 0 {
		return 0, nil
	}
	return exp[0].UnixMicro(), nil
}

// eachPage calls fn with successive pages of query's rows (keyset-paginated
// by token_id; query takes the pagination cursor as its last argument).
func eachPage(ctx context.Context, q db.Querier, query string, args []any, fn func([]entry) error) error {
	after := ""
	for {
		var page []entry
		if err := q.Select(ctx, &page, query, append(args, after)...); err != nil {
			return fmt.Errorf("revocation: read revocations: %w", err)
		}
		if len(page) > 0 {
			if err := fn(page); err != nil {
				return err
			}
		}
		if len(page) < pageSize {
			return nil
		}
		after = page[len(page)-1].ID
	}
}

// clearPending marks es as present in the Redis list, unless a row's
// expiry has moved on since it was pushed (a newer push then owns it).
func clearPending(ctx context.Context, store *db.DB, es []entry) error {
	if len(es) == 0 {
		return nil
	}
	err := store.InTx(ctx, func(tx *db.Tx) error {
		for _, e := range es {
			if _, err := tx.Exec(ctx, qClearPending, e.ID, e.ExpiresAt); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("revocation: clear pending flags: %w", err)
	}
	return nil
}
