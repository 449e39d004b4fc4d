package users

import (
	"context"
	"fmt"

	"github.com/gatehouse-id/gatehouse/pkg/db"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/apierr"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/eventstore"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/lockout"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/orgs"
)

// UserRemoved is the payload of EventRemoved; the names are kept for the
// audit log (the projection row is gone afterwards).
type UserRemoved struct {
	UserName string `json:"userName"`
	ClientID string `json:"clientId,omitempty"`
}

// memberRemoved is the payload of orgs.EventOrgMemberRemoved and
// orgs.EventInstanceMemberRemoved, as the orgs reducers read it.
type memberRemoved struct {
	UserID string `json:"userId"`
}

func registerLifecycle(es *eventstore.Store) {
	setState := func(state int32) eventstore.Reducer {
		return func(ctx context.Context, tx db.Querier, e eventstore.Event) error {
			if _, err := tx.Exec(ctx, `UPDATE users SET state = ? WHERE id = ?`, state, e.AggregateID); err != nil {
				return err
			}
			return touch(ctx, tx, e)
		}
	}
	deactivate := setState(StateInactive)
	es.Register(EventDeactivated, func(ctx context.Context, tx db.Querier, e eventstore.Event) error {
		if err := deactivate(ctx, tx, e); err != nil {
			return err
		}
		return CutAccess(ctx, tx, e.AggregateID, e.CreatedAt)
	})
	es.Register(EventReactivated, setState(StateActive))
	es.Register(EventUnlocked, func(ctx context.Context, tx db.Querier, e eventstore.Event) error {
		// In the event's transaction: the unlock is recorded if and only if
		// the counters are gone.
		for _, account := range []string{lockout.UserAccount(e.AggregateID), lockout.FactorAccount(e.AggregateID)} {
			if err := lockout.ForgetAccount(ctx, tx, account); err != nil {
				return err
			}
		}
		return touch(ctx, tx, e)
	})
	es.Register(EventRemoved, func(ctx context.Context, tx db.Querier, e eventstore.Event) error {
		// Explicit deletes rather than relying on ON DELETE CASCADE, so the
		// projection is right whatever the connection's foreign-key mode.
		for _, q := range []string{
			`DELETE FROM password_history WHERE user_id = ?`,
			`DELETE FROM machine_keys WHERE user_id = ?`,
			`DELETE FROM user_metadata WHERE user_id = ?`,
			`DELETE FROM user_links WHERE user_id = ?`,
			`DELETE FROM user_factors WHERE user_id = ?`,
			`DELETE FROM recovery_codes WHERE user_id = ?`,
			`DELETE FROM users WHERE id = ?`,
		} {
			if _, err := tx.Exec(ctx, q, e.AggregateID); err != nil {
				return err
			}
		}
		// The row is gone, so sessions end by the user being unknown; the
		// tokens are revoked through the outbox.
		return CutAccess(ctx, tx, e.AggregateID, e.CreatedAt)
	})
}

// Deactivate makes an active user inactive: no login and no new tokens.
// It removes the links the user's password proved (see passwordLinks), so
// reactivation does not bring back an identity someone else linked. Any
// other state is Aborted (409).
func (c *Commands) Deactivate(ctx context.Context, editor string, u *User) ([]eventstore.Event, error) {
	if u.State != StateActive {
		return nil, apierr.Precondition("USER-not-active", "only an active user can be deactivated")
	}
	evs, err := c.passwordLinks(ctx, u, LinkRemovedByDeactivation)
	if err != nil {
		return nil, err
	}
	return c.pushAll(ctx, editor, u, append(evs, eventstore.Pending{Type: EventDeactivated, Payload: struct{}{}}))
}

// Reactivate makes an inactive user active again. Any other state is
// Aborted (409).
func (c *Commands) Reactivate(ctx context.Context, editor string, u *User) ([]eventstore.Event, error) {
	if u.State != StateInactive {
		return nil, apierr.Precondition("USER-not-inactive", "only an inactive user can be reactivated")
	}
	return c.push(ctx, editor, u, EventReactivated, struct{}{})
}

// Unlock forgets the user's failed-password counters (package lockout):
// the delays of every client address and the organization's lock, if it
// has one. It is recorded in any state, also when nothing was counted.
func (c *Commands) Unlock(ctx context.Context, editor string, u *User) ([]eventstore.Event, error) {
	return c.push(ctx, editor, u, EventUnlocked, struct{}{})
}

// Remove deletes a user with its password history, keys, secret and
// metadata, and ends its memberships of organizations and of the instance
// in the same transaction (one command per membership aggregate, so a
// concurrent change of one of them is Aborted rather than lost). The user's
// event comes last, so the last stored event is the removal itself.
func (c *Commands) Remove(ctx context.Context, editor string, u *User) ([]eventstore.Event, error) {
	var cmds []eventstore.Command
	var memberOf []struct {
		OrgID   string `db:"org_id"`
		Version uint64 `db:"version"`
	}
	if err := c.ES.DB().Select(ctx, &memberOf, `SELECT m.org_id, o.version FROM org_members m JOIN orgs o ON o.id = m.org_id
		WHERE m.user_id = ? ORDER BY m.org_id`, u.ID); err != nil {
		return nil, fmt.Errorf("users: memberships of %s: %w", u.ID, err)
	}
	for _, m := range memberOf {
		cmds = append(cmds, eventstore.Command{
			Aggregate: eventstore.Aggregate{Type: orgs.AggregateOrg, ID: m.OrgID, ResourceOwner: m.OrgID},
			Version:   m.Version,
			Events:    []eventstore.Pending{{Type: orgs.EventOrgMemberRemoved, Payload: memberRemoved{UserID: u.ID}}},
		})
	}
	var instanceMember int
	if err := c.ES.DB().Get(ctx, &instanceMember, `SELECT COUNT(*) FROM instance_members WHERE user_id = ?`, u.ID); err != nil {
		return nil, fmt.Errorf("users: instance membership of %s: %w", u.ID, err)
	}
	if instanceMember > 0 {
		v, err := (&orgs.Queries{DB: c.ES.DB()}).InstanceVersion(ctx)
		if err != nil {
			return nil, fmt.Errorf("users: instance version: %w", err)
		}
		cmds = append(cmds, eventstore.Command{
			Aggregate: eventstore.Aggregate{Type: orgs.AggregateInstance, ID: orgs.InstanceID},
			Version:   v,
			Events:    []eventstore.Pending{{Type: orgs.EventInstanceMemberRemoved, Payload: memberRemoved{UserID: u.ID}}},
		})
	}
	cmds = append(cmds, eventstore.Command{
		Aggregate: u.Aggregate(),
		Version:   u.Version,
		Events:    []eventstore.Pending{{Type: EventRemoved, Payload: UserRemoved{UserName: u.UserName, ClientID: u.ClientID.String}}},
	})
	evs, err := c.ES.Push(ctx, editor, cmds...)
	return evs, apierr.FromStore(err, "user")
}

// push appends one event to the user's aggregate at its current version.
func (c *Commands) push(ctx context.Context, editor string, u *User, typ string, payload any) ([]eventstore.Event, error) {
	return c.pushAll(ctx, editor, u, []eventstore.Pending{{Type: typ, Payload: payload}})
}

// pushAll appends events to the user's aggregate at its current version:
// a concurrent change (a link made meanwhile, say) makes it Aborted.
func (c *Commands) pushAll(ctx context.Context, editor string, u *User, events []eventstore.Pending) ([]eventstore.Event, error) {
	evs, err := c.ES.Push(ctx, editor, eventstore.Command{Aggregate: u.Aggregate(), Version: u.Version, Events: events})
	return evs, apierr.FromStore(err, "user")
}
