package users

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"golang.org/x/text/cases"
	"golang.org/x/text/unicode/norm"

	"github.com/gatehouse-id/gatehouse/pkg/db"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/eventstore"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/mail"
)

// Aggregate type and event types.
const (
	Aggregate = "user"

	EventHumanAdded       = "user.human.added"
	EventMachineAdded     = "user.machine.added"
	EventPasswordChanged  = "user.password.changed"
	EventPasswordRehashed = "user.password.rehashed"
	EventDeactivated      = "user.deactivated"
	EventReactivated      = "user.reactivated"
	EventUnlocked         = "user.unlocked"
	EventRemoved          = "user.removed"
	EventMetadataSet      = "user.metadata.set"
	EventMetadataRemoved  = "user.metadata.removed"
	EventMachineKeyAdded  = "user.machine.key.added"
	EventMachineKeyRemove = "user.machine.key.removed"
	EventSecretSet        = "user.machine.secret.set"
	EventSecretRemoved    = "user.machine.secret.removed"
)

// Types and states (the management API's enum numbers).
const (
	TypeHuman   int32 = 1
	TypeMachine int32 = 2

	StateActive   int32 = 1
	StateInactive int32 = 2
	StateLocked   int32 = 4
	StateInitial  int32 = 6
)

// User is the projection of a user, joined with its organization's primary
// domain for login names.
type User struct {
	ID                string `db:"id"`
	OrgID             string `db:"org_id"`
	Type              int32  `db:"type"`
	UserName          string `db:"user_name"`
	State             int32  `db:"state"`
	FirstName         string `db:"first_name"`
	LastName          string `db:"last_name"`
	NickName          string `db:"nick_name"`
	DisplayName       string `db:"display_name"`
	PreferredLanguage string `db:"preferred_language"`
	Gender            int32  `db:"gender"`
	Email             string `db:"email"`
	EmailVerified     bool   `db:"email_verified"`
	// EmailProven: the verification holds whatever the domain (Proof).
	EmailProven            bool           `db:"email_proven"`
	EmailDomain            string         `db:"email_domain"`
	Phone                  string         `db:"phone"`
	PhoneVerified          bool           `db:"phone_verified"`
	PasswordHash           string         `db:"password_hash"`
	PasswordChangeRequired bool           `db:"password_change_required"`
	PasswordChanged        *time.Time     `db:"password_changed"`
	MachineName            string         `db:"machine_name"`
	MachineDescription     string         `db:"machine_description"`
	AccessTokenType        int32          `db:"access_token_type"`
	ClientID               sql.NullString `db:"client_id"`
	SecretHash             []byte         `db:"secret_hash"`
	CreationDate           time.Time      `db:"creation_date"`
	ChangeDate             time.Time      `db:"change_date"`
	Sequence               uint64         `db:"sequence"`
	Version                uint64         `db:"version"`
	PrimaryDomain          string         `db:"primary_domain"`
	// SessionsNotBefore ends sessions authenticated at or before it.
	SessionsNotBefore *time.Time `db:"sessions_not_before"`
}

// LoginName is userName@primaryDomain, the preferred login name.
func (u *User) LoginName() string { return u.UserName + "@" + u.PrimaryDomain }

// Aggregate returns the user's aggregate identity.
func (u *User) Aggregate() eventstore.Aggregate {
	return eventstore.Aggregate{Type: Aggregate, ID: u.ID, ResourceOwner: u.OrgID}
}

// HumanAdded is the payload of EventHumanAdded (also used by imports).
type HumanAdded struct {
	UserName          string `json:"userName"`
	FirstName         string `json:"firstName"`
	LastName          string `json:"lastName"`
	NickName          string `json:"nickName,omitempty"`
	DisplayName       string `json:"displayName"`
	PreferredLanguage string `json:"preferredLanguage,omitempty"`
	Gender            int32  `json:"gender,omitempty"`
	Email             string `json:"email,omitempty"`
	EmailVerified     bool   `json:"emailVerified,omitempty"`
	// EmailProof says who verified it (absent: unverified, or from before
	// proofs were recorded, which counts as ProofOrg).
	EmailProof             Proof  `json:"emailProof,omitempty"`
	Phone                  string `json:"phone,omitempty"`
	PhoneVerified          bool   `json:"phoneVerified,omitempty"`
	PasswordHash           string `json:"passwordHash,omitempty"`
	PasswordChangeRequired bool   `json:"passwordChangeRequired,omitempty"`
	// External: the user signs in through an external IdP (registered with
	// its link, see AddExternalHuman), so no password does not mean
	// "initial": the user is active at once.
	External bool `json:"external,omitempty"`
}

// MachineAdded is the payload of EventMachineAdded.
type MachineAdded struct {
	UserName        string `json:"userName"`
	Name            string `json:"name"`
	Description     string `json:"description,omitempty"`
	AccessTokenType int32  `json:"accessTokenType,omitempty"`
}

// PasswordChanged is the payload of EventPasswordChanged.
type PasswordChanged struct {
	PasswordHash   string `json:"passwordHash"`
	ChangeRequired bool   `json:"changeRequired"`
	// EndSessions: an admin set the password, so the user's sessions end
	// and its tokens are revoked (a self-service change keeps them).
	EndSessions bool `json:"endSessions,omitempty"`
	// Notice to the user's address, sealed (mail.Sealer).
	NoticeTo string `json:"noticeTo,omitempty"`
	Notice   []byte `json:"notice,omitempty"`
}

// passwordRehashed is the payload of EventPasswordRehashed.
type passwordRehashed struct {
	PasswordHash string `json:"passwordHash"`
}

// touch records an event reduced into the user projection.
func touch(ctx context.Context, tx db.Querier, e eventstore.Event) error {
	_, err := tx.Exec(ctx, `UPDATE users SET change_date = ?, sequence = ?, version = ? WHERE id = ?`,
		e.CreatedAt, e.Sequence, e.Version, e.AggregateID)
	return err
}

const insertUser = `INSERT INTO users (id, org_id, type, user_name, user_name_norm, state, first_name, last_name, nick_name, display_name,
	preferred_language, gender, email, email_verified, phone, phone_verified, password_hash, password_change_required,
	password_changed, machine_name, machine_description, access_token_type, creation_date, change_date, sequence, version,
	email_proven, email_domain)
	VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`

// Register adds the user reducers to es.
func Register(es *eventstore.Store) {
	registerExchange(es)
	es.Register(EventHumanAdded, func(ctx context.Context, tx db.Querier, e eventstore.Event) error {
		var p HumanAdded
		if err := e.Unmarshal(&p); err != nil {
			return err
		}
		state := StateActive
		var changed *time.Time
		if p.PasswordHash != "" {
			changed = &e.CreatedAt
		} else if !p.External {
			state = StateInitial // waits for its first password
		}
		if _, err := tx.Exec(ctx, insertUser, e.AggregateID, e.ResourceOwner, TypeHuman, p.UserName, NormalizeName(p.UserName), state,
			p.FirstName, p.LastName, p.NickName, p.DisplayName, p.PreferredLanguage, p.Gender, p.Email, p.EmailVerified,
			p.Phone, p.PhoneVerified, p.PasswordHash, p.PasswordChangeRequired, changed, "", "", 0,
			e.CreatedAt, e.CreatedAt, e.Sequence, e.Version, p.EmailVerified && p.EmailProof.proven(), Domain(p.Email)); err != nil {
			return err
		}
		if p.PasswordHash != "" {
			return addHistory(ctx, tx, e, p.PasswordHash)
		}
		return nil
	})
	es.Register(EventMachineAdded, func(ctx context.Context, tx db.Querier, e eventstore.Event) error {
		var p MachineAdded
		if err := e.Unmarshal(&p); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, insertUser, e.AggregateID, e.ResourceOwner, TypeMachine, p.UserName, NormalizeName(p.UserName), StateActive,
			"", "", "", p.Name, "", 0, "", false, "", false, "", false, nil, p.Name, p.Description, p.AccessTokenType,
			e.CreatedAt, e.CreatedAt, e.Sequence, e.Version, false, "")
		return err
	})
	es.Register(EventPasswordChanged, func(ctx context.Context, tx db.Querier, e eventstore.Event) error {
		var p PasswordChanged
		if err := e.Unmarshal(&p); err != nil {
			return err
		}
		// A user waiting for its first password becomes active.
		if _, err := tx.Exec(ctx, `UPDATE users SET password_hash = ?, password_change_required = ?, password_changed = ?,
			state = CASE WHEN state = ? THEN ? ELSE state END WHERE id = ?`,
			p.PasswordHash, p.ChangeRequired, e.CreatedAt, StateInitial, StateActive, e.AggregateID); err != nil {
			return err
		}
		if err := addHistory(ctx, tx, e, p.PasswordHash); err != nil {
			return err
		}
		if err := deleteCodes(ctx, tx, e.AggregateID, CodePassword); err != nil {
			return err
		}
		if err := deleteCodes(ctx, tx, e.AggregateID, CodeInit); err != nil {
			return err
		}
		if err := queueMail(ctx, tx, e, mail.KindPasswordChanged, p.NoticeTo, p.Notice); err != nil {
			return err
		}
		if p.EndSessions {
			if err := CutAccess(ctx, tx, e.AggregateID, e.CreatedAt); err != nil {
				return err
			}
		}
		return touch(ctx, tx, e)
	})
	es.Register(EventPasswordRehashed, func(ctx context.Context, tx db.Querier, e eventstore.Event) error {
		var p passwordRehashed
		if err := e.Unmarshal(&p); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `UPDATE users SET password_hash = ? WHERE id = ?`, p.PasswordHash, e.AggregateID); err != nil {
			return err
		}
		return touch(ctx, tx, e)
	})
	registerLifecycle(es)
	registerMachineKeys(es)
	registerMachineSecret(es)
	registerLinks(es)
	registerFactors(es)
	registerEmail(es)
}

func addHistory(ctx context.Context, tx db.Querier, e eventstore.Event, hash string) error {
	_, err := tx.Exec(ctx, `INSERT INTO password_history (user_id, sequence, password_hash) VALUES (?, ?, ?)`,
		e.AggregateID, e.Sequence, hash)
	return err
}

// Queries reads user projections.
type Queries struct{ DB *db.DB }

// Columns selects a User (with the org's primary domain) from users u JOIN orgs o.
const Columns = `u.id, u.org_id, u.type, u.user_name, u.state, u.first_name, u.last_name, u.nick_name, u.display_name,
	u.preferred_language, u.gender, u.email, u.email_verified, u.email_proven, u.email_domain, u.phone, u.phone_verified, u.password_hash,
	u.password_change_required, u.password_changed, u.machine_name, u.machine_description, u.access_token_type,
	u.client_id, u.secret_hash, u.creation_date, u.change_date, u.sequence, u.version, o.primary_domain, u.sessions_not_before`

// From is the FROM clause matching Columns.
const From = ` FROM users u JOIN orgs o ON o.id = u.org_id`

// Get returns a user by id, or db.ErrNotFound.
func (q *Queries) Get(ctx context.Context, id string) (*User, error) {
	var u User
	if err := q.DB.Get(ctx, &u, `SELECT `+Columns+From+` WHERE u.id = ?`, id); err != nil {
		return nil, db.NotFound(err)
	}
	return &u, nil
}

// GetWithLockout is Get with its organization's opt-in account lock
// (lockout_max_attempts) in the same read: a second factor's check needs
// both, on every login's path.
func (q *Queries) GetWithLockout(ctx context.Context, id string) (*User, int, error) {
	var row struct {
		User
		LockoutAttempts int `db:"org_lockout_attempts"`
	}
	if err := q.DB.Get(ctx, &row, `SELECT `+Columns+`, o.lockout_max_attempts AS org_lockout_attempts`+From+` WHERE u.id = ?`, id); err != nil {
		return nil, 0, db.NotFound(err)
	}
	return &row.User, row.LockoutAttempts, nil
}

// GetInOrg returns a user of org, or db.ErrNotFound (also for a user of
// another organization: callers must not learn it exists).
func (q *Queries) GetInOrg(ctx context.Context, orgID, id string) (*User, error) {
	var u User
	if err := q.DB.Get(ctx, &u, `SELECT `+Columns+From+` WHERE u.id = ? AND u.org_id = ?`, id, orgID); err != nil {
		return nil, db.NotFound(err)
	}
	return &u, nil
}

// PasswordHistory returns the user's last n password hashes, newest first.
func (q *Queries) PasswordHistory(ctx context.Context, userID string, n int) ([]string, error) {
	var out []string
	if n <= 0 {
		return nil, nil
	}
	err := q.DB.Select(ctx, &out, `SELECT password_hash FROM password_history WHERE user_id = ? ORDER BY sequence DESC LIMIT ?`, userID, n)
	return out, err
}

// CutAccess ends the user's sessions authenticated up to at and queues
// the revocation of its tokens issued up to then (the user_token_cutoffs
// outbox, which package cutoff delivers to the tokens service), in the
// event's transaction.
func CutAccess(ctx context.Context, tx db.Querier, userID string, at time.Time) error {
	if _, err := tx.Exec(ctx, `UPDATE users SET sessions_not_before = ? WHERE id = ?`, at, userID); err != nil {
		return err
	}
	_, err := tx.Exec(ctx, `INSERT INTO user_token_cutoffs (user_id, not_after) VALUES (?, ?)
		ON CONFLICT (user_id) DO UPDATE SET not_after = CASE WHEN excluded.not_after > user_token_cutoffs.not_after
		THEN excluded.not_after ELSE user_token_cutoffs.not_after END`, userID, at)
	return err
}

// NormalizeName is the form in which user names are unique in an
// organization and looked up at login: compatibility-normalised (NFKC),
// case-folded and normalised again, so "Admin", "ADMIN" and "Ａｄｍｉｎ"
// are one name.
func NormalizeName(s string) string {
	return norm.NFKC.String(cases.Fold().String(norm.NFKC.String(s)))
}

// RepairNormalizedNames gives every user the normalised name the Go code
// computes (migration 00005 could only lower-case in SQL, which folds
// ASCII alone on SQLite and on PostgreSQL's C locale, and knows no NFKC).
// Where two names become one, the older user keeps it and the newer one
// keeps NULL (it no longer signs in by that name until renamed), as the
// migration decided for plain case clashes. It runs once per store.
func RepairNormalizedNames(ctx context.Context, d *db.DB, now time.Time) error {
	const name = "users.user_name_norm"
	var done int
	if err := d.Get(ctx, &done, `SELECT COUNT(*) FROM repairs WHERE name = ?`, name); err != nil {
		return fmt.Errorf("users: repairs: %w", err)
	}
	if done > 0 {
		return nil
	}
	return d.InTx(ctx, func(tx *db.Tx) error {
		var rows []struct {
			ID       string         `db:"id"`
			OrgID    string         `db:"org_id"`
			UserName string         `db:"user_name"`
			Norm     sql.NullString `db:"user_name_norm"`
		}
		if err := tx.Select(ctx, &rows, `SELECT id, org_id, user_name, user_name_norm FROM users ORDER BY creation_date, id`); err != nil {
			return fmt.Errorf("users: read names: %w", err)
		}
		// The oldest user of each normalised name keeps it.
		owned := map[[2]string]bool{}
		type change struct {
			id   string
			norm *string
		}
		var changes []change
		for _, r := range rows {
			want := NormalizeName(r.UserName)
			var norm *string
			if k := [2]string{r.OrgID, want}; !owned[k] {
				owned[k], norm = true, &want
			}
			if (norm == nil) != !r.Norm.Valid || (norm != nil && *norm != r.Norm.String) {
				changes = append(changes, change{r.ID, norm})
			}
		}
		// Clear first, then set: the unique index never sees two at once.
		for _, c := range changes {
			if _, err := tx.Exec(ctx, `UPDATE users SET user_name_norm = NULL WHERE id = ?`, c.id); err != nil {
				return fmt.Errorf("users: repair the normalised name of %s: %w", c.id, err)
			}
		}
		for _, c := range changes {
			if c.norm == nil {
				continue
			}
			if _, err := tx.Exec(ctx, `UPDATE users SET user_name_norm = ? WHERE id = ?`, *c.norm, c.id); err != nil {
				return fmt.Errorf("users: repair the normalised name of %s: %w", c.id, err)
			}
		}
		_, err := tx.Exec(ctx, `INSERT INTO repairs (name, done_at) VALUES (?, ?)`, name, now)
		return err
	})
}
