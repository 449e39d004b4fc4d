package projects

import (
	"context"
	"fmt"

	"github.com/gatehouse-id/gatehouse/pkg/db"
)

// Queries reads the project, app and app key projections.
type Queries struct{ DB *db.DB }

const projectColumns = `id, org_id, name, state, project_role_assertion, project_role_check, has_project_check,
	private_labeling_setting, creation_date, change_date, sequence, version`

const appColumns = `a.id, a.project_id, a.org_id, a.name, a.state, a.kind, a.client_id, a.secret_hash, a.config,
	a.creation_date, a.change_date, a.sequence, a.admin_client`

const keyColumns = `id, app_id, project_id, org_id, type, public_key, expiration_date, creation_date, change_date, sequence`

// Project returns a project of org, or db.ErrNotFound (also for a project
// of another organization: callers must not learn it exists).
func (q *Queries) Project(ctx context.Context, orgID, id string) (*Project, error) {
	var p Project
	if err := q.DB.Get(ctx, &p, `SELECT `+projectColumns+` FROM projects WHERE id = ? AND org_id = ?`, id, orgID); err != nil {
		return nil, fmt.Errorf("project %s: %w", id, db.NotFound(err))
	}
	return &p, nil
}

// Projects returns every project of an organization.
func (q *Queries) Projects(ctx context.Context, orgID string) ([]Project, error) {
	var out []Project
	if err := q.DB.Select(ctx, &out, `SELECT `+projectColumns+` FROM projects WHERE org_id = ?`, orgID); err != nil {
		return nil, fmt.Errorf("projects of %s: %w", orgID, err)
	}
	return out, nil
}

// Apps returns every app of a project, configurations decoded.
func (q *Queries) Apps(ctx context.Context, projectID string) ([]App, error) {
	var out []App
	if err := q.DB.Select(ctx, &out, `SELECT `+appColumns+` FROM apps a WHERE a.project_id = ?`, projectID); err != nil {
		return nil, fmt.Errorf("apps of %s: %w", projectID, err)
	}
	for i := range out {
		if err := out[i].decode(); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// App returns an app of a project, or db.ErrNotFound.
func (q *Queries) App(ctx context.Context, projectID, appID string) (*App, error) {
	var a App
	if err := q.DB.Get(ctx, &a, `SELECT `+appColumns+` FROM apps a WHERE a.id = ? AND a.project_id = ?`, appID, projectID); err != nil {
		return nil, fmt.Errorf("app %s: %w", appID, db.NotFound(err))
	}
	if err := a.decode(); err != nil {
		return nil, err
	}
	return &a, nil
}

// AdminApp reports whether an app of the organization is an admin client;
// false when the organization has no such app.
func (q *Queries) AdminApp(ctx context.Context, orgID, appID string) (bool, error) {
	var admin []bool
	if err := q.DB.Select(ctx, &admin, `SELECT admin_client FROM apps WHERE id = ? AND org_id = ?`, appID, orgID); err != nil {
		return false, fmt.Errorf("app %s: %w", appID, err)
	}
	return len(admin) == 1 && admin[0], nil
}

// ManagementClient reports whether a management token of userID issued to
// clientID counts: the client is the machine user itself (its id, for a
// JWT profile grant, or its client id, for client credentials), or an app
// marked admin client now.
func (q *Queries) ManagementClient(ctx context.Context, userID, clientID string) (bool, error) {
	if clientID == userID {
		return true, nil
	}
	var n int
	if err := q.DB.Get(ctx, &n, `SELECT (SELECT COUNT(*) FROM users WHERE id = ? AND client_id = ?)
		+ (SELECT COUNT(*) FROM apps WHERE client_id = ? AND admin_client = ?)`, userID, clientID, clientID, true); err != nil {
		return false, fmt.Errorf("client %s of a management token: %w", clientID, err)
	}
	return n > 0, nil
}

// Keys returns an app's keys, oldest first.
func (q *Queries) Keys(ctx context.Context, appID string) ([]Key, error) {
	var keys []Key
	if err := q.DB.Select(ctx, &keys, `SELECT `+keyColumns+` FROM app_keys WHERE app_id = ? ORDER BY sequence`, appID); err != nil {
		return nil, fmt.Errorf("keys of app %s: %w", appID, err)
	}
	return keys, nil
}

// Key returns a key of an app, or db.ErrNotFound.
func (q *Queries) Key(ctx context.Context, appID, keyID string) (*Key, error) {
	var k Key
	if err := q.DB.Get(ctx, &k, `SELECT `+keyColumns+` FROM app_keys WHERE id = ? AND app_id = ?`, keyID, appID); err != nil {
		return nil, fmt.Errorf("key %s: %w", keyID, db.NotFound(err))
	}
	return &k, nil
}

// Client is an app as the token endpoint and login need it: the app with
// its configuration and secret hash, its project's state and its keys.
type Client struct {
	App
	ProjectState int32 `db:"project_state"`
	Keys         []Key `db:"-"`
}

// Active reports whether the app and its project can be used.
func (c *Client) Active() bool { return c.State == StateActive && c.ProjectState == StateActive }

// AppByClientID returns the app with the OAuth client_id, or db.ErrNotFound.
// SecretHash is the stored hash even when the auth method no longer uses a
// secret (UpdateOIDCAppConfig keeps it): check AuthMethod before accepting
// a secret.
func (q *Queries) AppByClientID(ctx context.Context, clientID string) (*Client, error) {
	var c Client
	if err := q.DB.Get(ctx, &c, `SELECT `+appColumns+`, p.state AS project_state
		FROM apps a JOIN projects p ON p.id = a.project_id WHERE a.client_id = ?`, clientID); err != nil {
		return nil, fmt.Errorf("client %s: %w", clientID, db.NotFound(err))
	}
	if err := c.decode(); err != nil {
		return nil, err
	}
	keys, err := q.Keys(ctx, c.ID)
	if err != nil {
		return nil, err
	}
	c.Keys = keys
	return &c, nil
}

// ActiveProjectIDs returns the ids of an organization's active projects.
func (q *Queries) ActiveProjectIDs(ctx context.Context, orgID string) ([]string, error) {
	var ids []string
	if err := q.DB.Select(ctx, &ids, `SELECT id FROM projects WHERE org_id = ? AND state = ? ORDER BY id`, orgID, StateActive); err != nil {
		return nil, fmt.Errorf("projects of %s: %w", orgID, err)
	}
	return ids, nil
}
