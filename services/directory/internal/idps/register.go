package idps

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/gatehouse-id/gatehouse/pkg/db"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/eventstore"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/users"
)

// Register adds this package's reducers to es.
func Register(es *eventstore.Store) {
	es.Register(EventOIDCAdded, func(ctx context.Context, tx db.Querier, e eventstore.Event) error {
		var p OIDCAdded
		if err := e.Unmarshal(&p); err != nil {
			return err
		}
		if err := claimName(ctx, tx, e.ResourceOwner, p.Name); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `INSERT INTO idps (id, org_id, name, styling_type, state, client_id, client_secret, issuer,
			scopes, display_name_mapping, username_mapping, auto_register, creation_date, change_date, sequence, version)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			e.AggregateID, e.ResourceOwner, p.Name, p.StylingType, StateActive, p.ClientID, p.ClientSecret, p.Issuer,
			p.Scopes, p.DisplayNameMapping, p.UsernameMapping, p.AutoRegister, e.CreatedAt, e.CreatedAt, e.Sequence, e.Version)
		return err
	})
	es.Register(EventOIDCConfigChanged, func(ctx context.Context, tx db.Querier, e eventstore.Event) error {
		var p OIDCConfigChanged
		if err := e.Unmarshal(&p); err != nil {
			return err
		}
		// Another provider inherits no link: the subjects it asserts are
		// of another namespace (or of another account), whoever they name.
		if err := dropLinks(ctx, tx, e, ` AND (issuer <> ? OR client_id <> ?)`, p.Issuer, p.ClientID); err != nil {
			return err
		}
		// An absent secret keeps the stored one. The trust was in the
		// provider an IAM owner knew: another one starts untrusted.
		_, err := tx.Exec(ctx, `UPDATE idps SET
			trust_amr = CASE WHEN issuer = ? AND client_id = ? THEN trust_amr ELSE ? END,
			client_id = ?, issuer = ?, scopes = ?, display_name_mapping = ?,
			username_mapping = ?, client_secret = COALESCE(?, client_secret), change_date = ?, sequence = ?, version = ?
			WHERE id = ?`,
			p.Issuer, p.ClientID, false,
			p.ClientID, p.Issuer, p.Scopes, p.DisplayNameMapping, p.UsernameMapping, nullBytes(p.ClientSecret),
			e.CreatedAt, e.Sequence, e.Version, e.AggregateID)
		return err
	})
	es.Register(EventTrustChanged, func(ctx context.Context, tx db.Querier, e eventstore.Event) error {
		var p TrustChanged
		if err := e.Unmarshal(&p); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `UPDATE idps SET trust_amr = ?, change_date = ?, sequence = ?, version = ? WHERE id = ?`,
			p.TrustAMR, e.CreatedAt, e.Sequence, e.Version, e.AggregateID)
		return err
	})
	es.Register(EventDeactivated, setState(StateInactive))
	es.Register(EventReactivated, setState(StateActive))
	es.Register(EventRemoved, func(ctx context.Context, tx db.Querier, e eventstore.Event) error {
		// Nobody signs in through a removed IdP: its users' links go with it
		// (explicitly, whatever the connection's foreign-key mode). The
		// users keep their other links and sign-in methods.
		if err := dropLinks(ctx, tx, e, ""); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `DELETE FROM idps WHERE id = ?`, e.AggregateID)
		return err
	})
}

// dropLinks removes the IdP's links (those matching cond, with args) and
// cuts access of every user who had one: a link is a credential, and what
// was signed in through it (sessions, tokens, codes) ends with it, as with
// a password reset (users.CutAccess, delivered by the cutoff outbox).
func dropLinks(ctx context.Context, tx db.Querier, e eventstore.Event, cond string, args ...any) error {
	var linked []string
	if err := tx.Select(ctx, &linked, `SELECT user_id FROM user_links WHERE idp_id = ?`+cond,
		append([]any{e.AggregateID}, args...)...); err != nil {
		return fmt.Errorf("users linked to idp %s: %w", e.AggregateID, err)
	}
	for _, u := range linked {
		if err := users.CutAccess(ctx, tx, u, e.CreatedAt); err != nil {
			return err
		}
	}
	_, err := tx.Exec(ctx, `DELETE FROM user_links WHERE idp_id = ?`+cond, append([]any{e.AggregateID}, args...)...)
	return err
}

func setState(state int32) eventstore.Reducer {
	return func(ctx context.Context, tx db.Querier, e eventstore.Event) error {
		_, err := tx.Exec(ctx, `UPDATE idps SET state = ?, change_date = ?, sequence = ?, version = ? WHERE id = ?`,
			state, e.CreatedAt, e.Sequence, e.Version, e.AggregateID)
		return err
	}
}

// claimName fails with ErrNameTaken when another IdP of org has name. The
// projection has no unique index on (org_id, name), so on PostgreSQL the
// org row is locked first (NO KEY UPDATE: foreign-key checks of other
// inserts are not blocked): concurrent adds to one organization then check
// one after the other. SQLite transactions already write one at a time.
func claimName(ctx context.Context, tx db.Querier, orgID, name string) error {
	if tx.Dialect() == db.Postgres {
		var id string
		if err := tx.Get(ctx, &id, `SELECT id FROM orgs WHERE id = ? FOR NO KEY UPDATE`, orgID); err != nil {
			return fmt.Errorf("lock organization %s: %w", orgID, db.NotFound(err))
		}
	}
	var taken string
	err := tx.Get(ctx, &taken, `SELECT id FROM idps WHERE org_id = ? AND name = ?`, orgID, name)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return nil
	case err != nil:
		return fmt.Errorf("check idp name: %w", err)
	}
	return fmt.Errorf("%w: %q", ErrNameTaken, name)
}

// nullBytes is NULL for an empty slice (COALESCE keeps the column).
func nullBytes(b []byte) any {
	if len(b) == 0 {
		return nil
	}
	return b
}
