package orgs

import (
	"context"
	"time"

	"github.com/gatehouse-id/gatehouse/pkg/db"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/eventstore"
)

// EventSecurityPolicySet sets an organization's security policy.
const EventSecurityPolicySet = "org.policy.security.set"

// SecurityPolicy is an organization's security settings; without one of
// its own, an organization has the zero policy.
type SecurityPolicy struct {
	// EnableImpersonation lets a machine user holding RoleImpersonator in
	// the organization (and every role of the user) exchange a user's token
	// for one of its own without an actor (token exchange, RFC 8693).
	EnableImpersonation bool `json:"enableImpersonation" db:"enable_impersonation"`
}

// StoredSecurityPolicy is an organization's own policy with its history.
type StoredSecurityPolicy struct {
	SecurityPolicy
	OrgID        string    `db:"org_id"`
	CreationDate time.Time `db:"creation_date"`
	ChangeDate   time.Time `db:"change_date"`
	Sequence     uint64    `db:"sequence"`
}

func registerSecurityPolicy(es *eventstore.Store) {
	es.Register(EventSecurityPolicySet, func(ctx context.Context, tx db.Querier, e eventstore.Event) error {
		var p SecurityPolicy
		if err := e.Unmarshal(&p); err != nil {
			return err
		}
		if !p.EnableImpersonation {
			if err := CutImpersonations(ctx, tx, e.AggregateID, e.CreatedAt); err != nil {
				return err
			}
		}
		if _, err := tx.Exec(ctx, `INSERT INTO security_policies (org_id, enable_impersonation, creation_date, change_date, sequence)
			VALUES (?, ?, ?, ?, ?) ON CONFLICT (org_id) DO UPDATE SET enable_impersonation = excluded.enable_impersonation,
			change_date = excluded.change_date, sequence = excluded.sequence`,
			e.AggregateID, p.EnableImpersonation, e.CreatedAt, e.CreatedAt, e.Sequence); err != nil {
			return err
		}
		return touch(ctx, tx, e)
	})
}

// SetSecurityPolicy sets org's security policy.
func (c *Commands) SetSecurityPolicy(ctx context.Context, editor string, org *Org, p SecurityPolicy) ([]eventstore.Event, error) {
	return c.ES.Push(ctx, editor, eventstore.Command{
		Aggregate: eventstore.Aggregate{Type: AggregateOrg, ID: org.ID, ResourceOwner: org.ID},
		Version:   org.Version,
		Events:    []eventstore.Pending{{Type: EventSecurityPolicySet, Payload: p}},
	})
}

// OwnSecurityPolicy returns the organization's own policy, or
// db.ErrNotFound.
func (q *Queries) OwnSecurityPolicy(ctx context.Context, orgID string) (*StoredSecurityPolicy, error) {
	var s StoredSecurityPolicy
	if err := q.DB.Get(ctx, &s, `SELECT org_id, enable_impersonation, creation_date, change_date, sequence
		FROM security_policies WHERE org_id = ?`, orgID); err != nil {
		return nil, db.NotFound(err)
	}
	return &s, nil
}

// CutImpersonations queues, in the event's transaction, the revocation of
// every token an impersonation issued for org's users up to at (the
// cutoff outbox delivers it).
func CutImpersonations(ctx context.Context, tx db.Querier, org string, at time.Time) error {
	_, err := tx.Exec(ctx, `INSERT INTO impersonation_cutoffs (org_id, not_after) VALUES (?, ?)
		ON CONFLICT (org_id) DO UPDATE SET not_after = CASE WHEN excluded.not_after > impersonation_cutoffs.not_after
		THEN excluded.not_after ELSE impersonation_cutoffs.not_after END`, org, at)
	return err
}
