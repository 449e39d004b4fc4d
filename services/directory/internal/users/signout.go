package users

import (
	"context"

	"github.com/gatehouse-id/gatehouse/pkg/db"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/eventstore"
)

// EventSignedOutEverywhere: the user signed out everywhere (the account
// page). Its reducer cuts access as a password reset does: every session
// authenticated until then ends, every token issued until then is
// revoked (CutAccess).
const EventSignedOutEverywhere = "user.human.signedout.everywhere"

func registerSignOut(es *eventstore.Store) {
	es.Register(EventSignedOutEverywhere, func(ctx context.Context, tx db.Querier, e eventstore.Event) error {
		if err := CutAccess(ctx, tx, e.AggregateID, e.CreatedAt); err != nil {
			return err
		}
		return touch(ctx, tx, e)
	})
}

// SignOutEverywhere ends every session of u and revokes its tokens.
func (c *Commands) SignOutEverywhere(ctx context.Context, editor string, u *User) ([]eventstore.Event, error) {
	return c.push(ctx, editor, u, EventSignedOutEverywhere, struct{}{})
}
