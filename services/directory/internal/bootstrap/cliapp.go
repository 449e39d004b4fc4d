package bootstrap

import (
	"context"
	"errors"
	"fmt"

	"github.com/gatehouse-id/gatehouse/pkg/db"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/eventstore"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/orgs"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/projects"
)

// cliApp is the gatehouse CLI's app as it is created.
func cliApp() projects.BuiltinApp {
	return projects.BuiltinApp{
		Name:     CLIAppName,
		ClientID: CLIClientID,
		OIDC: projects.OIDCConfig{
			RedirectURIs:    []string{CLIRedirectIPv4, CLIRedirectIPv6},
			ResponseTypes:   []string{projects.ResponseCode},
			GrantTypes:      []string{projects.GrantAuthorizationCode, projects.GrantRefreshToken},
			AppType:         projects.AppTypeNative,
			AuthMethod:      projects.AuthNone,
			AccessTokenType: projects.AccessTokenOpaque, // the API's default (OIDC_TOKEN_TYPE_BEARER)
		},
		AdminClient: true,
	}
}

// ensureCLIApp creates the CLI's app in the project CLIProjectName of the
// default organization (making the project when there is none), once per
// store: the app, and the instance.cli_app_ensured marker saying so, are
// one change, so replicas starting together create it once (the losers'
// push fails on the instance's version, the unique client_id or the
// project name, and Run retries). Once marked, a removed or deactivated app is an admin's
// decision: it is reported at each start, never re-created.
func ensureCLIApp(ctx context.Context, o Options, orgID string) error {
	d := o.ES.DB()
	pq := &projects.Queries{DB: d}
	oq := &orgs.Queries{DB: d}
	// The marker is pushed at the instance version read before anything
	// else: a replica whose marker commits after this read makes the push
	// below fail (and Run retry), one committed before it is counted next.
	v, err := oq.InstanceVersion(ctx)
	if err != nil {
		return err
	}
	var done int
	if err := d.Get(ctx, &done, `SELECT COUNT(*) FROM events WHERE event_type = ?`, eventCLIAppEnsured); err != nil {
		return fmt.Errorf("bootstrap: %w", err)
	}
	existing, err := pq.AppByClientID(ctx, CLIClientID)
	if err != nil && !errors.Is(err, db.ErrNotFound) {
		return fmt.Errorf("bootstrap: %w", err)
	}
	if done > 0 {
		switch {
		case existing == nil:
			o.Logger.Info("the gatehouse CLI's app was removed; it is not re-created, so the CLI cannot sign in through the browser",
				"client_id", CLIClientID)
		case !existing.Active():
			o.Logger.Info("the gatehouse CLI's app or its project is inactive, so the CLI cannot sign in through the browser",
				"client_id", CLIClientID, "project_id", existing.ProjectID, "app_id", existing.ID)
		}
		return nil
	}
	if _, err := oq.Get(ctx, orgID); err != nil {
		return fmt.Errorf("bootstrap: the default organization %q: %w", orgID, err)
	}
	var cmds []eventstore.Command
	if existing == nil {
		var project *projects.Project
		var id string
		err := d.Get(ctx, &id, `SELECT id FROM projects WHERE org_id = ? AND name = ?`, orgID, CLIProjectName)
		switch {
		case err == nil:
			if project, err = pq.Project(ctx, orgID, id); err != nil {
				return fmt.Errorf("bootstrap: %w", err)
			}
		case !errors.Is(db.NotFound(err), db.ErrNotFound):
			return fmt.Errorf("bootstrap: %w", err)
		}
		if project != nil {
			// An admin's own app of that name must not stop the start:
			// say so and try again at the next one.
			var taken int
			if err := d.Get(ctx, &taken, `SELECT COUNT(*) FROM apps WHERE project_id = ? AND name = ?`, project.ID, CLIAppName); err != nil {
				return fmt.Errorf("bootstrap: %w", err)
			}
			if taken > 0 {
				o.Logger.Warn("cannot create the gatehouse CLI's app: its project already has an app of that name; rename that app",
					"project_id", project.ID, "app_name", CLIAppName)
				return nil
			}
		}
		if cmds, err = projects.BuiltinAppCommands(orgID, project, CLIProjectName, cliApp()); err != nil {
			return err
		}
	}
	// An app with the CLI's client_id but no marker is another replica's,
	// committed after v was read (this push then fails on the version and
	// Run retries): app and marker are one change, and the API never takes
	// a client_id. Should one exist otherwise, only the marker is recorded.
	cmds = append(cmds, eventstore.Command{
		Aggregate: eventstore.Aggregate{Type: orgs.AggregateInstance, ID: orgs.InstanceID},
		Version:   v,
		Events:    []eventstore.Pending{{Type: eventCLIAppEnsured, Payload: map[string]string{"clientId": CLIClientID}}},
	})
	if _, err := o.ES.Push(ctx, "bootstrap", cmds...); err != nil {
		return fmt.Errorf("bootstrap: the gatehouse CLI's app: %w", err)
	}
	if existing == nil {
		o.Logger.Info("created the gatehouse CLI's app", "client_id", CLIClientID, "project", CLIProjectName, "org_id", orgID)
	}
	return nil
}
