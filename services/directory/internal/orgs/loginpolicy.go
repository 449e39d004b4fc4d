package orgs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/gatehouse-id/gatehouse/pkg/db"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/eventstore"
)

// Login policy events of the org aggregate (ZITADEL's names).
const (
	EventLoginPolicyAdded   = "org.policy.login.added"
	EventLoginPolicyChanged = "org.policy.login.changed"
	EventLoginPolicyRemoved = "org.policy.login.removed"
)

// LoginPolicy is how an organization's users sign in: every field of
// ZITADEL's login policy. Gatehouse enforces AllowUsernamePassword,
// AllowRegister and IgnoreUnknownUsernames; the multi-factor fields are
// stored for the MFA work to come.
type LoginPolicy struct {
	AllowUsernamePassword      bool          `json:"allowUsernamePassword"`
	AllowRegister              bool          `json:"allowRegister"`
	AllowExternalIDP           bool          `json:"allowExternalIdp"`
	ForceMFA                   bool          `json:"forceMfa"`
	ForceMFALocalOnly          bool          `json:"forceMfaLocalOnly"`
	PasswordlessType           int32         `json:"passwordlessType"`
	HidePasswordReset          bool          `json:"hidePasswordReset"`
	IgnoreUnknownUsernames     bool          `json:"ignoreUnknownUsernames"`
	DefaultRedirectURI         string        `json:"defaultRedirectUri,omitempty"`
	PasswordCheckLifetime      time.Duration `json:"passwordCheckLifetime"`
	ExternalLoginCheckLifetime time.Duration `json:"externalLoginCheckLifetime"`
	MFAInitSkipLifetime        time.Duration `json:"mfaInitSkipLifetime"`
	SecondFactorCheckLifetime  time.Duration `json:"secondFactorCheckLifetime"`
	MultiFactorCheckLifetime   time.Duration `json:"multiFactorCheckLifetime"`
	SecondFactors              []int32       `json:"secondFactors,omitempty"`
	MultiFactors               []int32       `json:"multiFactors,omitempty"`
	AllowDomainDiscovery       bool          `json:"allowDomainDiscovery"`
	DisableLoginWithEmail      bool          `json:"disableLoginWithEmail"`
	DisableLoginWithPhone      bool          `json:"disableLoginWithPhone"`
	// RequireVerifiedEmail (Gatehouse's own): the login pages have a user
	// verify an unverified address before they issue anything.
	RequireVerifiedEmail bool `json:"requireVerifiedEmail,omitempty"`
}

// DefaultLoginPolicy applies to organizations without their own. It is
// the safe choice: no self-registration, and an unknown login name is not
// revealed (the password page follows and fails like a wrong password).
// The lifetimes are ZITADEL's defaults.
var DefaultLoginPolicy = LoginPolicy{
	AllowUsernamePassword:      true,
	AllowRegister:              false,
	AllowExternalIDP:           true,
	IgnoreUnknownUsernames:     true,
	PasswordCheckLifetime:      240 * time.Hour,
	ExternalLoginCheckLifetime: 240 * time.Hour,
	MFAInitSkipLifetime:        720 * time.Hour,
	SecondFactorCheckLifetime:  18 * time.Hour,
	MultiFactorCheckLifetime:   12 * time.Hour,
}

// StoredLoginPolicy is an organization's own policy with its history.
type StoredLoginPolicy struct {
	OrgID        string    `db:"org_id"`
	Raw          string    `db:"policy"`
	CreationDate time.Time `db:"creation_date"`
	ChangeDate   time.Time `db:"change_date"`
	Sequence     uint64    `db:"sequence"`
	Policy       LoginPolicy
}

func registerLoginPolicy(es *eventstore.Store) {
	upsert := func(ctx context.Context, tx db.Querier, e eventstore.Event) error {
		var p LoginPolicy
		if err := e.Unmarshal(&p); err != nil {
			return err
		}
		raw, err := json.Marshal(p)
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `INSERT INTO login_policies (org_id, policy, creation_date, change_date, sequence)
			VALUES (?, ?, ?, ?, ?) ON CONFLICT (org_id) DO UPDATE SET policy = excluded.policy,
			change_date = excluded.change_date, sequence = excluded.sequence`,
			e.AggregateID, string(raw), e.CreatedAt, e.CreatedAt, e.Sequence); err != nil {
			return err
		}
		return touch(ctx, tx, e)
	}
	es.Register(EventLoginPolicyAdded, upsert)
	es.Register(EventLoginPolicyChanged, upsert)
	es.Register(EventLoginPolicyRemoved, func(ctx context.Context, tx db.Querier, e eventstore.Event) error {
		if _, err := tx.Exec(ctx, `DELETE FROM login_policies WHERE org_id = ?`, e.AggregateID); err != nil {
			return err
		}
		return touch(ctx, tx, e)
	})
}

// OwnLoginPolicy returns the organization's own policy, or db.ErrNotFound.
func (q *Queries) OwnLoginPolicy(ctx context.Context, orgID string) (*StoredLoginPolicy, error) {
	var s StoredLoginPolicy
	if err := q.DB.Get(ctx, &s, `SELECT org_id, policy, creation_date, change_date, sequence FROM login_policies WHERE org_id = ?`, orgID); err != nil {
		return nil, db.NotFound(err)
	}
	if err := json.Unmarshal([]byte(s.Raw), &s.Policy); err != nil {
		return nil, fmt.Errorf("login policy of %s: %w", orgID, err)
	}
	return &s, nil
}

// GetWithLoginPolicy returns an organization and the login policy in force
// for it (see LoginPolicy) in one query, or db.ErrNotFound: a login reads
// both at every step.
func (q *Queries) GetWithLoginPolicy(ctx context.Context, id string) (*Org, LoginPolicy, error) {
	var row struct {
		Org
		Policy *string `db:"login_policy"`
	}
	if err := q.DB.Get(ctx, &row, `SELECT `+qualified("o", orgColumns)+`, lp.policy AS login_policy
		FROM orgs o LEFT JOIN login_policies lp ON lp.org_id = o.id WHERE o.id = ?`, id); err != nil {
		return nil, LoginPolicy{}, db.NotFound(err)
	}
	if row.Policy == nil {
		return &row.Org, DefaultLoginPolicy, nil
	}
	var lp LoginPolicy
	if err := json.Unmarshal([]byte(*row.Policy), &lp); err != nil {
		return nil, LoginPolicy{}, fmt.Errorf("login policy of %s: %w", id, err)
	}
	return &row.Org, lp, nil
}

// qualified prefixes each of a comma-separated list of columns with table.
func qualified(table, columns string) string {
	cols := strings.Split(columns, ",")
	for i, c := range cols {
		cols[i] = table + "." + strings.TrimSpace(c)
	}
	return strings.Join(cols, ", ")
}

// LoginPolicy returns the policy in force for an organization: its own or
// the default.
func (q *Queries) LoginPolicy(ctx context.Context, orgID string) (LoginPolicy, error) {
	s, err := q.OwnLoginPolicy(ctx, orgID)
	if errors.Is(err, db.ErrNotFound) {
		return DefaultLoginPolicy, nil
	}
	if err != nil {
		return LoginPolicy{}, err
	}
	return s.Policy, nil
}

// SetLoginPolicy adds (typ EventLoginPolicyAdded), replaces
// (EventLoginPolicyChanged) or removes (EventLoginPolicyRemoved) the
// organization's own policy.
func (c *Commands) SetLoginPolicy(ctx context.Context, editor string, org *Org, typ string, p LoginPolicy) ([]eventstore.Event, error) {
	var payload any = p
	if typ == EventLoginPolicyRemoved {
		payload = struct{}{}
	}
	return c.ES.Push(ctx, editor, eventstore.Command{
		Aggregate: eventstore.Aggregate{Type: AggregateOrg, ID: org.ID, ResourceOwner: org.ID},
		Version:   org.Version,
		Events:    []eventstore.Pending{{Type: typ, Payload: payload}},
	})
}
