package metadata

import (
	"context"
	"fmt"

	"github.com/gatehouse-id/gatehouse/pkg/db"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/eventstore"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/users"
)

// Register adds this package's reducers to es.
func Register(es *eventstore.Store) {
	es.Register(users.EventMetadataSet, reduceSet)
	es.Register(users.EventMetadataRemoved, reduceRemoved)
}

// reduceSet adds an entry or replaces its value; a replaced entry keeps its
// creation date.
func reduceSet(ctx context.Context, tx db.Querier, e eventstore.Event) error {
	var p setPayload
	if err := e.Unmarshal(&p); err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, `INSERT INTO user_metadata (user_id, key, value, org_id, creation_date, change_date, sequence)
		VALUES (?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (user_id, key) DO UPDATE SET value = excluded.value, change_date = excluded.change_date, sequence = excluded.sequence`,
		e.AggregateID, p.Key, p.Value, e.ResourceOwner, e.CreatedAt, e.CreatedAt, e.Sequence); err != nil {
		return fmt.Errorf("set metadata: %w", err)
	}
	return touchUser(ctx, tx, e)
}

// reduceRemoved deletes an entry. Commands only remove keys that are set
// (checked at the user's version, which Push verifies), so a missing row
// means the check was bypassed: fail with db.ErrNotFound rather than
// record a removal that removed nothing.
func reduceRemoved(ctx context.Context, tx db.Querier, e eventstore.Event) error {
	var p removedPayload
	if err := e.Unmarshal(&p); err != nil {
		return err
	}
	res, err := tx.Exec(ctx, `DELETE FROM user_metadata WHERE user_id = ? AND key = ?`, e.AggregateID, p.Key)
	if err != nil {
		return fmt.Errorf("remove metadata: %w", err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return fmt.Errorf("remove metadata: %w", err)
	} else if n == 0 {
		return fmt.Errorf("remove metadata %q of user %s: %w", p.Key, e.AggregateID, db.ErrNotFound)
	}
	return touchUser(ctx, tx, e)
}

// touchUser records the event in the user projection: metadata events are
// events of the user aggregate, so the user's change date, sequence and
// version (the next write's expected version) move with them.
func touchUser(ctx context.Context, tx db.Querier, e eventstore.Event) error {
	if _, err := tx.Exec(ctx, `UPDATE users SET change_date = ?, sequence = ?, version = ? WHERE id = ?`,
		e.CreatedAt, e.Sequence, e.Version, e.AggregateID); err != nil {
		return fmt.Errorf("touch user %s: %w", e.AggregateID, err)
	}
	return nil
}
