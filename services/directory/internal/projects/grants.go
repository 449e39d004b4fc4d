package projects

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/gatehouse-id/gatehouse/pkg/db"
	"github.com/gatehouse-id/gatehouse/pkg/secrets"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/apierr"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/eventstore"
)

// Project grant events (of the project aggregate, as in ZITADEL).
const (
	EventGrantAdded   = "project.grant.added"
	EventGrantChanged = "project.grant.changed"
	EventGrantRemoved = "project.grant.removed"
)

// Grant is the projection of a project grant.
type Grant struct {
	ID           string    `db:"id"`
	ProjectID    string    `db:"project_id"`
	OrgID        string    `db:"org_id"`
	GrantedOrgID string    `db:"granted_org_id"`
	RoleKeysRaw  string    `db:"role_keys"`
	State        int32     `db:"state"`
	CreationDate time.Time `db:"creation_date"`
	ChangeDate   time.Time `db:"change_date"`
	Sequence     uint64    `db:"sequence"`
}

// RoleKeys are the granted project roles.
func (g *Grant) RoleKeys() []string {
	var out []string
	_ = json.Unmarshal([]byte(g.RoleKeysRaw), &out)
	return out
}

type grantAdded struct {
	GrantID      string   `json:"grantId"`
	GrantedOrgID string   `json:"grantedOrgId"`
	RoleKeys     []string `json:"roleKeys,omitempty"`
}

type grantChanged struct {
	GrantID  string   `json:"grantId"`
	RoleKeys []string `json:"roleKeys,omitempty"`
}

type grantRemoved struct {
	GrantID      string `json:"grantId"`
	GrantedOrgID string `json:"grantedOrgId"`
}

func roleKeysJSON(keys []string) string {
	if keys == nil {
		keys = []string{}
	}
	b, _ := json.Marshal(keys)
	return string(b)
}

func registerGrants(es *eventstore.Store) {
	es.Register(EventGrantAdded, func(ctx context.Context, tx db.Querier, e eventstore.Event) error {
		var p grantAdded
		if err := e.Unmarshal(&p); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `INSERT INTO project_grants (id, project_id, org_id, granted_org_id, role_keys, state,
			creation_date, change_date, sequence) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			p.GrantID, e.AggregateID, e.ResourceOwner, p.GrantedOrgID, roleKeysJSON(p.RoleKeys), StateActive,
			e.CreatedAt, e.CreatedAt, e.Sequence); err != nil {
			return err
		}
		return bumpProject(ctx, tx, e)
	})
	es.Register(EventGrantChanged, func(ctx context.Context, tx db.Querier, e eventstore.Event) error {
		var p grantChanged
		if err := e.Unmarshal(&p); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `UPDATE project_grants SET role_keys = ?, change_date = ?, sequence = ? WHERE id = ?`,
			roleKeysJSON(p.RoleKeys), e.CreatedAt, e.Sequence, p.GrantID); err != nil {
			return err
		}
		return bumpProject(ctx, tx, e)
	})
	es.Register(EventGrantRemoved, func(ctx context.Context, tx db.Querier, e eventstore.Event) error {
		var p grantRemoved
		if err := e.Unmarshal(&p); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `DELETE FROM project_grants WHERE id = ?`, p.GrantID); err != nil {
			return err
		}
		// A removed grant is a cut: what the project's clients hold for
		// the organization's users goes, through the outbox (package
		// cutoff), as durable as the removal.
		if _, err := tx.Exec(ctx, `INSERT INTO grant_cutoffs (project_id, org_id, not_after) VALUES (?, ?, ?)
			ON CONFLICT (project_id, org_id) DO UPDATE SET not_after = CASE WHEN excluded.not_after > grant_cutoffs.not_after
			THEN excluded.not_after ELSE grant_cutoffs.not_after END`, e.AggregateID, p.GrantedOrgID, e.CreatedAt); err != nil {
			return err
		}
		return bumpProject(ctx, tx, e)
	})
}

const grantColumns = `id, project_id, org_id, granted_org_id, role_keys, state, creation_date, change_date, sequence`

// Grant returns a grant of a project, or db.ErrNotFound.
func (q *Queries) Grant(ctx context.Context, projectID, grantID string) (*Grant, error) {
	var g Grant
	if err := q.DB.Get(ctx, &g, `SELECT `+grantColumns+` FROM project_grants WHERE project_id = ? AND id = ?`, projectID, grantID); err != nil {
		return nil, db.NotFound(err)
	}
	return &g, nil
}

// Grants returns a page of a project's grants by creation date, and the
// total.
func (q *Queries) Grants(ctx context.Context, projectID string, offset, limit uint64, asc bool) ([]Grant, uint64, error) {
	var total uint64
	if err := q.DB.Get(ctx, &total, `SELECT COUNT(*) FROM project_grants WHERE project_id = ?`, projectID); err != nil {
		return nil, 0, fmt.Errorf("count grants: %w", err)
	}
	dir := "DESC"
	if asc {
		dir = "ASC"
	}
	var out []Grant
	if err := q.DB.Select(ctx, &out, `SELECT `+grantColumns+` FROM project_grants WHERE project_id = ?
		ORDER BY creation_date `+dir+`, id `+dir+` LIMIT ? OFFSET ?`, projectID, limit, offset); err != nil {
		return nil, 0, fmt.Errorf("list grants: %w", err)
	}
	return out, total, nil
}

// Received is a grant made to an organization, with its project.
type Received struct {
	Grant
	ProjectName  string `db:"project_name"`
	ProjectOwner string `db:"project_owner_name"`
}

// Received returns a page of the grants made to grantedOrgID by creation
// date, with their projects, and the total.
func (q *Queries) Received(ctx context.Context, grantedOrgID string, offset, limit uint64, asc bool) ([]Received, uint64, error) {
	var total uint64
	if err := q.DB.Get(ctx, &total, `SELECT COUNT(*) FROM project_grants WHERE granted_org_id = ?`, grantedOrgID); err != nil {
		return nil, 0, fmt.Errorf("count received grants: %w", err)
	}
	dir := "DESC"
	if asc {
		dir = "ASC"
	}
	var out []Received
	if err := q.DB.Select(ctx, &out, `SELECT g.id, g.project_id, g.org_id, g.granted_org_id, g.role_keys, g.state, g.creation_date,
		g.change_date, g.sequence, p.name AS project_name, o.name AS project_owner_name
		FROM project_grants g JOIN projects p ON p.id = g.project_id JOIN orgs o ON o.id = g.org_id
		WHERE g.granted_org_id = ? ORDER BY g.creation_date `+dir+`, g.id `+dir+` LIMIT ? OFFSET ?`,
		grantedOrgID, limit, offset); err != nil {
		return nil, 0, fmt.Errorf("list received grants: %w", err)
	}
	return out, total, nil
}

// ReceivedGrant returns a grant of projectID made to grantedOrgID, or
// db.ErrNotFound (also for another organization's grant).
func (q *Queries) ReceivedGrant(ctx context.Context, grantedOrgID, projectID, grantID string) (*Grant, error) {
	var g Grant
	if err := q.DB.Get(ctx, &g, `SELECT `+grantColumns+` FROM project_grants WHERE granted_org_id = ? AND project_id = ? AND id = ?`,
		grantedOrgID, projectID, grantID); err != nil {
		return nil, db.NotFound(err)
	}
	return &g, nil
}

// ActiveGrant names an organization a project is granted to, and the grant.
type ActiveGrant struct {
	GrantedOrgID string `db:"granted_org_id"`
	GrantID      string `db:"id"`
}

// ActiveGrants returns the project's active grants to existing
// organizations, by organization.
func (q *Queries) ActiveGrants(ctx context.Context, projectID string) ([]ActiveGrant, error) {
	var out []ActiveGrant
	if err := q.DB.Select(ctx, &out, `SELECT g.granted_org_id, g.id FROM project_grants g JOIN orgs o ON o.id = g.granted_org_id
		WHERE g.project_id = ? AND g.state = ? ORDER BY g.granted_org_id`, projectID, StateActive); err != nil {
		return nil, fmt.Errorf("granted organizations: %w", err)
	}
	return out, nil
}

// AddGrant grants p to grantedOrg.
func (c *Commands) AddGrant(ctx context.Context, editor string, p *Project, grantedOrg string, roleKeys []string) (string, []eventstore.Event, error) {
	id := secrets.NewID()
	evs, err := c.ES.Push(ctx, editor, eventstore.Command{
		Aggregate: p.Aggregate(),
		Version:   p.Version,
		Events:    []eventstore.Pending{{Type: EventGrantAdded, Payload: grantAdded{GrantID: id, GrantedOrgID: grantedOrg, RoleKeys: roleKeys}}},
	})
	return id, evs, apierr.FromStore(err, "project grant")
}

// ChangeGrant replaces g's role keys.
func (c *Commands) ChangeGrant(ctx context.Context, editor string, p *Project, g *Grant, roleKeys []string) ([]eventstore.Event, error) {
	evs, err := c.ES.Push(ctx, editor, eventstore.Command{
		Aggregate: p.Aggregate(),
		Version:   p.Version,
		Events:    []eventstore.Pending{{Type: EventGrantChanged, Payload: grantChanged{GrantID: g.ID, RoleKeys: roleKeys}}},
	})
	return evs, apierr.FromStore(err, "project grant")
}

// RemoveGrant removes g.
func (c *Commands) RemoveGrant(ctx context.Context, editor string, p *Project, g *Grant) ([]eventstore.Event, error) {
	evs, err := c.ES.Push(ctx, editor, eventstore.Command{
		Aggregate: p.Aggregate(),
		Version:   p.Version,
		Events:    []eventstore.Pending{{Type: EventGrantRemoved, Payload: grantRemoved{GrantID: g.ID, GrantedOrgID: g.GrantedOrgID}}},
	})
	return evs, apierr.FromStore(err, "project grant")
}

// LastEvent returns the sequence and time of a project's last event (the
// last one reduced into its grants, apps and itself).
func (q *Queries) LastEvent(ctx context.Context, projectID string) (uint64, time.Time, error) {
	var last struct {
		Sequence  uint64    `db:"sequence"`
		CreatedAt time.Time `db:"created_at"`
	}
	if err := q.DB.Get(ctx, &last, `SELECT sequence, created_at FROM events WHERE aggregate_type = ? AND aggregate_id = ?
		ORDER BY sequence DESC LIMIT 1`, Aggregate, projectID); err != nil {
		return 0, time.Time{}, fmt.Errorf("last event of project %s: %w", projectID, err)
	}
	return last.Sequence, last.CreatedAt, nil
}
