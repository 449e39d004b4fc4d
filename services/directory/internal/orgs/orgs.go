package orgs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode"

	"golang.org/x/text/runes"
	"golang.org/x/text/transform"
	"golang.org/x/text/unicode/norm"

	"github.com/gatehouse-id/gatehouse/pkg/db"
	"github.com/gatehouse-id/gatehouse/pkg/secrets"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/eventstore"
)

// Roles.
const (
	RoleIAMOwner       = "IAM_OWNER"
	RoleOrgOwner       = "ORG_OWNER"
	RoleOrgUserManager = "ORG_USER_MANAGER"
	// RoleImpersonator (ZITADEL's name) may impersonate the organization's
	// users through token exchange where the organization enables it. No
	// other organization role includes it: only an IAM owner can grant it.
	RoleImpersonator = "ORG_END_USER_IMPERSONATOR"
)

// OrgRoles are the roles a member of an organization can hold.
var OrgRoles = []string{RoleOrgOwner, RoleOrgUserManager, RoleImpersonator}

// Aggregate types and the instance aggregate's id.
const (
	AggregateOrg      = "org"
	AggregateInstance = "instance"
	InstanceID        = "instance"
)

// Event types.
const (
	EventOrgAdded                    = "org.added"
	EventOrgMemberAdded              = "org.member.added"
	EventOrgMemberRemoved            = "org.member.removed"
	EventInstanceMemberAdded         = "instance.member.added"
	EventInstanceMemberRemoved       = "instance.member.removed"
	StateActive                int32 = 1
	StateInactive              int32 = 2
)

// PasswordPolicy is an organization's password complexity policy.
type PasswordPolicy struct {
	MinLength    int  `json:"minLength" db:"pw_min_length"`
	HasUppercase bool `json:"hasUppercase" db:"pw_has_uppercase"`
	HasLowercase bool `json:"hasLowercase" db:"pw_has_lowercase"`
	HasNumber    bool `json:"hasNumber" db:"pw_has_number"`
	HasSymbol    bool `json:"hasSymbol" db:"pw_has_symbol"`
	// History: a new password may not equal any of the last History ones.
	History int `json:"history" db:"pw_history"`
}

// DefaultPasswordPolicy applies to every new organization.
var DefaultPasswordPolicy = PasswordPolicy{MinLength: 8, HasUppercase: true, HasLowercase: true, HasNumber: true, History: 3}

// DefaultLockoutAttempts is how many failed passwords in a row lock a
// user from every address (lockout_max_attempts): 0, none. Anyone who
// knows a login name could trigger that lock, so it is an organization's
// opt-in; by default failures only slow down their (name, address) pair
// (package lockout).
const DefaultLockoutAttempts = 0

// Org is the projection of an organization.
type Org struct {
	ID              string `db:"id"`
	Name            string `db:"name"`
	PrimaryDomain   string `db:"primary_domain"`
	State           int32  `db:"state"`
	LockoutAttempts int    `db:"lockout_max_attempts"`
	PasswordPolicy
	CreationDate time.Time `db:"creation_date"`
	ChangeDate   time.Time `db:"change_date"`
	Sequence     uint64    `db:"sequence"`
	Version      uint64    `db:"version"`
}

type orgAdded struct {
	Name            string         `json:"name"`
	PrimaryDomain   string         `json:"primaryDomain"`
	PasswordPolicy  PasswordPolicy `json:"passwordPolicy"`
	LockoutAttempts int            `json:"lockoutAttempts"`
}

type memberPayload struct {
	UserID string   `json:"userId"`
	Roles  []string `json:"roles,omitempty"`
}

// Register adds this package's reducers to es.
func Register(es *eventstore.Store) {
	registerLoginPolicy(es)
	registerDomains(es)
	registerSecurityPolicy(es)
	es.Register(EventOrgAdded, func(ctx context.Context, tx db.Querier, e eventstore.Event) error {
		var p orgAdded
		if err := e.Unmarshal(&p); err != nil {
			return err
		}
		pp := p.PasswordPolicy
		_, err := tx.Exec(ctx, `INSERT INTO orgs (id, name, primary_domain, state, pw_min_length, pw_has_uppercase,
			pw_has_lowercase, pw_has_number, pw_has_symbol, pw_history, lockout_max_attempts, creation_date, change_date, sequence, version)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			e.AggregateID, p.Name, p.PrimaryDomain, StateActive, pp.MinLength, pp.HasUppercase, pp.HasLowercase, pp.HasNumber,
			pp.HasSymbol, pp.History, p.LockoutAttempts, e.CreatedAt, e.CreatedAt, e.Sequence, e.Version)
		if err != nil {
			return err
		}
		return addPrimaryDomain(ctx, tx, e, p.PrimaryDomain)
	})
	es.Register(EventOrgMemberAdded, func(ctx context.Context, tx db.Querier, e eventstore.Event) error {
		var p memberPayload
		if err := e.Unmarshal(&p); err != nil {
			return err
		}
		roles, _ := json.Marshal(p.Roles)
		if _, err := tx.Exec(ctx, `INSERT INTO org_members (org_id, user_id, roles, creation_date, change_date, sequence)
			VALUES (?, ?, ?, ?, ?, ?)`, e.AggregateID, p.UserID, string(roles), e.CreatedAt, e.CreatedAt, e.Sequence); err != nil {
			return err
		}
		return touch(ctx, tx, e)
	})
	es.Register(EventOrgMemberRemoved, func(ctx context.Context, tx db.Querier, e eventstore.Event) error {
		var p memberPayload
		if err := e.Unmarshal(&p); err != nil {
			return err
		}
		var roles string
		err := tx.Get(ctx, &roles, `SELECT roles FROM org_members WHERE org_id = ? AND user_id = ?`, e.AggregateID, p.UserID)
		if err != nil && !errors.Is(db.NotFound(err), db.ErrNotFound) {
			return err
		}
		if err == nil {
			// The impersonation role goes: what it issued goes with it.
			var rs []string
			_ = json.Unmarshal([]byte(roles), &rs)
			if slices.Contains(rs, RoleImpersonator) {
				if err := CutImpersonations(ctx, tx, e.AggregateID, e.CreatedAt); err != nil {
					return err
				}
			}
		}
		if _, err := tx.Exec(ctx, `DELETE FROM org_members WHERE org_id = ? AND user_id = ?`, e.AggregateID, p.UserID); err != nil {
			return err
		}
		return touch(ctx, tx, e)
	})
	es.Register(EventInstanceMemberAdded, func(ctx context.Context, tx db.Querier, e eventstore.Event) error {
		var p memberPayload
		if err := e.Unmarshal(&p); err != nil {
			return err
		}
		roles, _ := json.Marshal(p.Roles)
		_, err := tx.Exec(ctx, `INSERT INTO instance_members (user_id, roles, creation_date, change_date, sequence)
			VALUES (?, ?, ?, ?, ?)`, p.UserID, string(roles), e.CreatedAt, e.CreatedAt, e.Sequence)
		return err
	})
	es.Register(EventInstanceMemberRemoved, func(ctx context.Context, tx db.Querier, e eventstore.Event) error {
		var p memberPayload
		if err := e.Unmarshal(&p); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `DELETE FROM instance_members WHERE user_id = ?`, p.UserID)
		return err
	})
}

// touch records an event reduced into the org projection.
func touch(ctx context.Context, tx db.Querier, e eventstore.Event) error {
	_, err := tx.Exec(ctx, `UPDATE orgs SET change_date = ?, sequence = ?, version = ? WHERE id = ?`,
		e.CreatedAt, e.Sequence, e.Version, e.AggregateID)
	return err
}

var nonDNS = regexp.MustCompile(`[^a-z0-9]+`)

// PrimaryDomain derives an organization's default primary domain: its name
// lowercased and made DNS-safe, then "." and the issuer's host.
func PrimaryDomain(name, issuerHost string) string {
	// "Über" becomes "uber": strip accents before dropping what DNS forbids.
	folded, _, err := transform.String(transform.Chain(norm.NFD, runes.Remove(runes.In(unicode.Mn)), norm.NFC), name)
	if err != nil {
		folded = name
	}
	label := strings.Trim(nonDNS.ReplaceAllString(strings.ToLower(folded), "-"), "-")
	if len(label) > 63 {
		label = strings.TrimRight(label[:63], "-")
	}
	if label == "" {
		label = "org"
	}
	return label + "." + issuerHost
}

// Commands produces organization events.
type Commands struct {
	ES         *eventstore.Store
	IssuerHost string // host of the issuer, without port
}

// AddOrg creates an organization; extra commands (e.g. making the creator
// its owner) are pushed in the same transaction. It returns the org id and
// the stored events.
func (c *Commands) AddOrg(ctx context.Context, editor, name string, owners []string) (string, []eventstore.Event, error) {
	id := secrets.NewID()
	agg := eventstore.Aggregate{Type: AggregateOrg, ID: id, ResourceOwner: id}
	events := []eventstore.Pending{{Type: EventOrgAdded, Payload: orgAdded{
		Name: name, PrimaryDomain: PrimaryDomain(name, c.IssuerHost),
		PasswordPolicy: DefaultPasswordPolicy, LockoutAttempts: DefaultLockoutAttempts,
	}}}
	for _, u := range owners {
		events = append(events, eventstore.Pending{Type: EventOrgMemberAdded, Payload: memberPayload{UserID: u, Roles: []string{RoleOrgOwner}}})
	}
	evs, err := c.ES.Push(ctx, editor, eventstore.Command{Aggregate: agg, Events: events})
	return id, evs, err
}

// AddMember grants roles in org to a user.
func (c *Commands) AddMember(ctx context.Context, editor string, org *Org, userID string, roles []string) ([]eventstore.Event, error) {
	return c.ES.Push(ctx, editor, eventstore.Command{
		Aggregate: eventstore.Aggregate{Type: AggregateOrg, ID: org.ID, ResourceOwner: org.ID},
		Version:   org.Version,
		Events:    []eventstore.Pending{{Type: EventOrgMemberAdded, Payload: memberPayload{UserID: userID, Roles: roles}}},
	})
}

// RemoveMember revokes a user's membership of org.
func (c *Commands) RemoveMember(ctx context.Context, editor string, org *Org, userID string) ([]eventstore.Event, error) {
	return c.ES.Push(ctx, editor, eventstore.Command{
		Aggregate: eventstore.Aggregate{Type: AggregateOrg, ID: org.ID, ResourceOwner: org.ID},
		Version:   org.Version,
		Events:    []eventstore.Pending{{Type: EventOrgMemberRemoved, Payload: memberPayload{UserID: userID}}},
	})
}

// InstanceMemberCommand grants instance-wide roles (e.g. IAM_OWNER); push
// it with other commands. version is the instance aggregate's version.
func InstanceMemberCommand(version uint64, userID string, roles []string) eventstore.Command {
	return eventstore.Command{
		Aggregate: eventstore.Aggregate{Type: AggregateInstance, ID: InstanceID},
		Version:   version,
		Events:    []eventstore.Pending{{Type: EventInstanceMemberAdded, Payload: memberPayload{UserID: userID, Roles: roles}}},
	}
}

// Queries reads organization projections.
type Queries struct{ DB *db.DB }

const orgColumns = `id, name, primary_domain, state, lockout_max_attempts, pw_min_length, pw_has_uppercase,
	pw_has_lowercase, pw_has_number, pw_has_symbol, pw_history, creation_date, change_date, sequence, version`

// Get returns an organization or db.ErrNotFound.
func (q *Queries) Get(ctx context.Context, id string) (*Org, error) {
	var o Org
	if err := q.DB.Get(ctx, &o, `SELECT `+orgColumns+` FROM orgs WHERE id = ?`, id); err != nil {
		return nil, db.NotFound(err)
	}
	return &o, nil
}

// All returns every organization. Organizations are created by IAM owners
// only, so there are as many as an operator chose to make.
func (q *Queries) All(ctx context.Context) ([]Org, error) {
	var out []Org
	if err := q.DB.Select(ctx, &out, `SELECT `+orgColumns+` FROM orgs`); err != nil {
		return nil, fmt.Errorf("orgs: %w", err)
	}
	return out, nil
}

// Count returns the number of organizations (0 on a fresh store).
func (q *Queries) Count(ctx context.Context) (int, error) {
	var n int
	err := q.DB.Get(ctx, &n, `SELECT COUNT(*) FROM orgs`)
	return n, err
}

// Member is a membership row.
type Member struct {
	OrgID        string    `db:"org_id"`
	UserID       string    `db:"user_id"`
	RolesJSON    string    `db:"roles"`
	CreationDate time.Time `db:"creation_date"`
	ChangeDate   time.Time `db:"change_date"`
	Sequence     uint64    `db:"sequence"`
}

// Roles decodes the member's roles.
func (m *Member) Roles() []string {
	var r []string
	_ = json.Unmarshal([]byte(m.RolesJSON), &r)
	return r
}

// Member returns a user's membership of org, or db.ErrNotFound.
func (q *Queries) Member(ctx context.Context, orgID, userID string) (*Member, error) {
	var m Member
	if err := q.DB.Get(ctx, &m, `SELECT org_id, user_id, roles, creation_date, change_date, sequence
		FROM org_members WHERE org_id = ? AND user_id = ?`, orgID, userID); err != nil {
		return nil, db.NotFound(err)
	}
	return &m, nil
}

// Members returns every membership of an organization.
func (q *Queries) Members(ctx context.Context, orgID string) ([]Member, error) {
	var out []Member
	if err := q.DB.Select(ctx, &out, `SELECT org_id, user_id, roles, creation_date, change_date, sequence
		FROM org_members WHERE org_id = ?`, orgID); err != nil {
		return nil, fmt.Errorf("members of %s: %w", orgID, err)
	}
	return out, nil
}

// Memberships returns every organization membership of a user.
func (q *Queries) Memberships(ctx context.Context, userID string) ([]Member, error) {
	var out []Member
	if err := q.DB.Select(ctx, &out, `SELECT org_id, user_id, roles, creation_date, change_date, sequence
		FROM org_members WHERE user_id = ? ORDER BY org_id`, userID); err != nil {
		return nil, fmt.Errorf("memberships: %w", err)
	}
	return out, nil
}

// InstanceRoles returns a user's instance-wide roles.
func (q *Queries) InstanceRoles(ctx context.Context, userID string) ([]string, error) {
	var raw string
	err := q.DB.Get(ctx, &raw, `SELECT roles FROM instance_members WHERE user_id = ?`, userID)
	if errors.Is(db.NotFound(err), db.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("instance roles: %w", err)
	}
	var r []string
	_ = json.Unmarshal([]byte(raw), &r)
	return r, nil
}

// InstanceVersion returns the instance aggregate's version.
func (q *Queries) InstanceVersion(ctx context.Context) (uint64, error) {
	var v uint64
	err := q.DB.Get(ctx, &v, `SELECT COALESCE(MAX(aggregate_version), 0) FROM events WHERE aggregate_id = ?`, InstanceID)
	return v, err
}

// Roles returns the roles userID holds in orgID, IAM_OWNER included when
// held instance-wide.
func (q *Queries) Roles(ctx context.Context, userID, orgID string) ([]string, error) {
	roles, err := q.InstanceRoles(ctx, userID)
	if err != nil {
		return nil, err
	}
	m, err := q.Member(ctx, orgID, userID)
	if errors.Is(err, db.ErrNotFound) {
		return roles, nil
	}
	if err != nil {
		return nil, err
	}
	return append(roles, m.Roles()...), nil
}
