package projects

import (
	"fmt"
	"strings"

	"github.com/gatehouse-id/gatehouse/pkg/secrets"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/apierr"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/eventstore"
)

// BuiltinApp is an OIDC application Gatehouse itself provides (the
// gatehouse CLI's): its client_id is fixed rather than generated, so its
// users need no configuration. Only code in this repository makes one; the
// management API always generates client ids, so nobody can choose one.
type BuiltinApp struct {
	Name     string
	ClientID string
	OIDC     OIDCConfig
	// AdminClient marks the app as an admin client in the same change.
	AdminClient bool
}

// BuiltinAppCommands returns the commands that add app to the project p,
// or, when p is nil, to a new project named projectName of orgID. The
// caller pushes them with its own commands, in one transaction. A taken
// client_id, project or app name fails that push with
// eventstore.ErrUnique.
func BuiltinAppCommands(orgID string, p *Project, projectName string, app BuiltinApp) ([]eventstore.Command, error) {
	cfg := app.OIDC
	cfg.Normalize()
	var f apierr.Fields
	cfg.Validate(&f)
	f.Check(apierr.Length("name", app.Name, 1, MaxNameLength))
	f.Check(apierr.Length("client_id", app.ClientID, 1, 200))
	// Generated ids are "<id>@<slug>": a fixed one without "@" can never
	// take one of theirs.
	if strings.ContainsAny(app.ClientID, "@: \t\r\n") {
		f.Add("client_id", "must not contain '@', ':' or whitespace")
	}
	if MethodUsesSecret(cfg.AuthMethod) || cfg.AuthMethod == AuthPrivateKeyJWT {
		f.Add("auth_method", "a built-in app is a public client (auth method none)")
	}
	if err := f.Err("APP-builtin-invalid"); err != nil {
		return nil, fmt.Errorf("projects: built-in app %s: %w", app.ClientID, err)
	}
	var cmds []eventstore.Command
	if p == nil {
		p = &Project{ID: secrets.NewID(), OrgID: orgID, Name: projectName}
		cmds = append(cmds, eventstore.Command{Aggregate: p.Aggregate(), Events: []eventstore.Pending{{Type: EventAdded, Payload: ProjectAdded{Name: projectName}}}})
		p.Version = 1
	}
	appID := secrets.NewID()
	events := []eventstore.Pending{{Type: EventAppAdded, Payload: appAdded{AppID: appID, Name: app.Name, Kind: KindOIDC, ClientID: app.ClientID, OIDC: &cfg}}}
	if app.AdminClient {
		events = append(events, eventstore.Pending{Type: EventAppAdminClientSet, Payload: adminClientSet{AppID: appID, AdminClient: true}})
	}
	return append(cmds, eventstore.Command{Aggregate: p.Aggregate(), Version: p.Version, Events: events}), nil
}
