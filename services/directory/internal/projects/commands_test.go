package projects_test

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"connectrpc.com/connect"

	"github.com/gatehouse-id/gatehouse/pkg/db"
	"github.com/gatehouse-id/gatehouse/pkg/secrets"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/eventstore"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/orgs"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/projections"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/projects"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/storetest"
)

func TestCommandsAndQueries(t *testing.T) {
	storetest.Run(t, func(t *testing.T, d db.Dialect) {
		ctx := context.Background()
		st := storetest.Open(t, d)
		es := eventstore.New(st, nil)
		projections.RegisterAll(es)
		hasher, err := secrets.NewHasher(bytes.Repeat([]byte{7}, 32))
		if err != nil {
			t.Fatal(err)
		}
		cmd := &projects.Commands{ES: es, Hasher: hasher}
		q := &projects.Queries{DB: st}
		orgA, _, err := (&orgs.Commands{ES: es, IssuerHost: "localhost"}).AddOrg(ctx, "test", "Org A", nil)
		if err != nil {
			t.Fatal(err)
		}
		orgB, _, err := (&orgs.Commands{ES: es, IssuerHost: "localhost"}).AddOrg(ctx, "test", "Org B", nil)
		if err != nil {
			t.Fatal(err)
		}

		pid, _, err := cmd.AddProject(ctx, "editor", orgA, projects.ProjectAdded{Name: "P"})
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := cmd.AddProject(ctx, "editor", orgA, projects.ProjectAdded{Name: "P"}); connect.CodeOf(err) != connect.CodeAlreadyExists {
			t.Fatalf("duplicate project name: %v; want AlreadyExists", err)
		}
		if _, _, err := cmd.AddProject(ctx, "editor", orgB, projects.ProjectAdded{Name: "P"}); err != nil {
			t.Fatalf("same name in another org: %v", err)
		}
		if _, err := q.Project(ctx, orgB, pid); !errors.Is(err, db.ErrNotFound) {
			t.Fatalf("project through another org: %v; want ErrNotFound", err)
		}

		p, err := q.Project(ctx, orgA, pid)
		if err != nil {
			t.Fatal(err)
		}
		cfg := projects.OIDCConfig{RedirectURIs: []string{"https://a.example/cb"}, AppType: projects.AppTypeWeb, AuthMethod: projects.AuthBasic, AccessTokenType: projects.AccessTokenOpaque}
		cfg.Normalize()
		app, evs, err := cmd.AddOIDCApp(ctx, "editor", p, "web", cfg)
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(evs[0].Payload, []byte(app.Secret)) || evs[0].Editor != "editor" || evs[0].ResourceOwner != orgA {
			t.Fatalf("app event = %+v", evs[0])
		}
		// p is now stale: its version predates the app.
		if _, _, err := cmd.AddAPIApp(ctx, "editor", p, "api", projects.APIConfig{AuthMethod: projects.AuthBasic}); connect.CodeOf(err) != connect.CodeAborted {
			t.Fatalf("stale project version: %v; want Aborted", err)
		}
		all, err := es.Events(ctx, eventstore.Filter{AggregateID: pid})
		if err != nil || len(all) != 2 {
			t.Fatalf("project events %v, %v", all, err)
		}
		if p, err = q.Project(ctx, orgA, pid); err != nil || p.Version != 2 || p.Sequence != all[0].Sequence {
			t.Fatalf("project after app = %+v, %v; want version 2 and its own sequence", p, err)
		}
		if _, _, err := cmd.AddAPIApp(ctx, "editor", p, "web", projects.APIConfig{AuthMethod: projects.AuthBasic}); connect.CodeOf(err) != connect.CodeAlreadyExists {
			t.Fatalf("duplicate app name: %v; want AlreadyExists", err)
		}

		a, err := q.App(ctx, pid, app.ID)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := cmd.ChangeOIDCConfig(ctx, "editor", p, a, cfg); connect.CodeOf(err) != connect.CodeAborted {
			t.Fatalf("unchanged config: %v; want Aborted", err)
		}
		cfg.AuthMethod = projects.AuthNone
		if _, err := cmd.ChangeOIDCConfig(ctx, "editor", p, a, cfg); err != nil {
			t.Fatal(err)
		}
		c, err := q.AppByClientID(ctx, app.ClientID)
		if err != nil {
			t.Fatal(err)
		}
		// The secret is kept (the API says client id and secret are
		// unchanged), so consumers must look at the auth method.
		if c.AuthMethod() != projects.AuthNone || c.UsesSecret() || !hasher.Verify(app.Secret, c.SecretHash) || !c.Active() {
			t.Fatalf("client after switching to none = %+v", c)
		}
		if _, err := st.Exec(ctx, `UPDATE projects SET state = ? WHERE id = ?`, projects.StateInactive, pid); err != nil {
			t.Fatal(err)
		}
		if c, err = q.AppByClientID(ctx, app.ClientID); err != nil || c.Active() || c.ProjectState != projects.StateInactive {
			t.Fatalf("client of an inactive project = %+v, %v; want inactive", c, err)
		}
	})
}
