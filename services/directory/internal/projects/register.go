package projects

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/gatehouse-id/gatehouse/pkg/db"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/eventstore"
)

// Register adds this package's reducers to es. Project events update the
// project row's details; app and key events update the app row's details
// and only the project's version (ZITADEL's projections likewise keep app
// changes out of the project's change date).
func Register(es *eventstore.Store) {
	es.Register(EventAdded, reduceProjectAdded)
	registerGrants(es)
	es.Register(EventAppAdded, reduceAppAdded)
	es.Register(EventOIDCConfigChanged, func(ctx context.Context, tx db.Querier, e eventstore.Event) error {
		var p oidcConfigChanged
		if err := e.Unmarshal(&p); err != nil {
			return err
		}
		cfg, err := json.Marshal(p.Config)
		if err != nil {
			return fmt.Errorf("projects: encode config: %w", err)
		}
		return touchApp(ctx, tx, e, p.AppID, `config = ?`, string(cfg))
	})
	es.Register(EventAppSecretChanged, func(ctx context.Context, tx db.Querier, e eventstore.Event) error {
		var p secretChanged
		if err := e.Unmarshal(&p); err != nil {
			return err
		}
		return touchApp(ctx, tx, e, p.AppID, `secret_hash = ?`, p.SecretHash)
	})
	es.Register(EventAppAdminClientSet, func(ctx context.Context, tx db.Querier, e eventstore.Event) error {
		var p adminClientSet
		if err := e.Unmarshal(&p); err != nil {
			return err
		}
		return touchApp(ctx, tx, e, p.AppID, `admin_client = ?`, p.AdminClient)
	})
	es.Register(EventAppKeyAdded, func(ctx context.Context, tx db.Querier, e eventstore.Event) error {
		var p keyAdded
		if err := e.Unmarshal(&p); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `INSERT INTO app_keys (id, app_id, project_id, org_id, type, public_key, expiration_date,
			creation_date, change_date, sequence) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			p.KeyID, p.AppID, e.AggregateID, e.ResourceOwner, p.Type, p.PublicKey, p.Expiration,
			e.CreatedAt, e.CreatedAt, e.Sequence); err != nil {
			return err
		}
		return touchApp(ctx, tx, e, p.AppID, "")
	})
	es.Register(EventAppKeyRemoved, func(ctx context.Context, tx db.Querier, e eventstore.Event) error {
		var p keyRemoved
		if err := e.Unmarshal(&p); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `DELETE FROM app_keys WHERE id = ? AND app_id = ?`, p.KeyID, p.AppID); err != nil {
			return err
		}
		return touchApp(ctx, tx, e, p.AppID, "")
	})
}

func reduceProjectAdded(ctx context.Context, tx db.Querier, e eventstore.Event) error {
	var p ProjectAdded
	if err := e.Unmarshal(&p); err != nil {
		return err
	}
	// Names are unique per organization. The projection has no unique
	// index for it, so the check runs here, in the appending transaction.
	var n int
	if err := tx.Get(ctx, &n, `SELECT COUNT(*) FROM projects WHERE org_id = ? AND name = ?`, e.ResourceOwner, p.Name); err != nil {
		return err
	}
	if n > 0 {
		return fmt.Errorf("%w: project %q", ErrNameTaken, p.Name)
	}
	_, err := tx.Exec(ctx, `INSERT INTO projects (id, org_id, name, state, project_role_assertion, project_role_check,
		has_project_check, private_labeling_setting, creation_date, change_date, sequence, version)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		e.AggregateID, e.ResourceOwner, p.Name, StateActive, p.ProjectRoleAssertion, p.ProjectRoleCheck,
		p.HasProjectCheck, p.PrivateLabelingSetting, e.CreatedAt, e.CreatedAt, e.Sequence, e.Version)
	return err
}

func reduceAppAdded(ctx context.Context, tx db.Querier, e eventstore.Event) error {
	var p appAdded
	if err := e.Unmarshal(&p); err != nil {
		return err
	}
	// App names are unique per project; the project's version serializes
	// writes to its apps, so this check cannot race.
	var n int
	if err := tx.Get(ctx, &n, `SELECT COUNT(*) FROM apps WHERE project_id = ? AND name = ?`, e.AggregateID, p.Name); err != nil {
		return err
	}
	if n > 0 {
		return fmt.Errorf("%w: application %q", ErrNameTaken, p.Name)
	}
	var cfg any = p.OIDC
	if p.Kind == KindAPI {
		cfg = p.API
	}
	raw, err := json.Marshal(cfg)
	if err != nil {
		return fmt.Errorf("projects: encode config: %w", err)
	}
	var secret any // NULL, not an empty blob, for apps without a secret
	if len(p.SecretHash) > 0 {
		secret = p.SecretHash
	}
	if _, err := tx.Exec(ctx, `INSERT INTO apps (id, project_id, org_id, name, state, kind, client_id, secret_hash, config,
		creation_date, change_date, sequence) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		p.AppID, e.AggregateID, e.ResourceOwner, p.Name, StateActive, p.Kind, p.ClientID, secret, string(raw),
		e.CreatedAt, e.CreatedAt, e.Sequence); err != nil {
		return err
	}
	return bumpProject(ctx, tx, e)
}

// touchApp records an event about an app (setting one more column when set
// is not empty) and advances the project's version.
func touchApp(ctx context.Context, tx db.Querier, e eventstore.Event, appID, set string, arg ...any) error {
	q := `UPDATE apps SET change_date = ?, sequence = ?`
	args := []any{e.CreatedAt, e.Sequence}
	if set != "" {
		q += `, ` + set
		args = append(args, arg...)
	}
	q += ` WHERE id = ? AND project_id = ?`
	args = append(args, appID, e.AggregateID)
	res, err := tx.Exec(ctx, q, args...)
	if err != nil {
		return err
	}
	if n, err := res.RowsAffected(); err == nil && n != 1 {
		return fmt.Errorf("projects: app %s of project %s not found", appID, e.AggregateID)
	}
	return bumpProject(ctx, tx, e)
}

func bumpProject(ctx context.Context, tx db.Querier, e eventstore.Event) error {
	_, err := tx.Exec(ctx, `UPDATE projects SET version = ? WHERE id = ?`, e.Version, e.AggregateID)
	return err
}
