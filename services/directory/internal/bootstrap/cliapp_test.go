package bootstrap_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gatehouse-id/gatehouse/pkg/db"
	"github.com/gatehouse-id/gatehouse/pkg/logging"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/bootstrap"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/eventstore"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/projections"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/projects"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/storetest"
)

// cliStore is a directory store and bootstrap options over it.
func cliStore(t *testing.T, d db.Dialect) (*db.DB, bootstrap.Options) {
	t.Helper()
	st := storetest.Open(t, d)
	es := eventstore.New(st, nil)
	projections.RegisterAll(es)
	return st, bootstrap.Options{ES: es, IssuerHost: "id.example.com", DataDir: t.TempDir(), AdminPassword: "Operator-Chosen-1",
		Logger: logging.Discard(), Now: time.Now}
}

// wantCLIApp checks that the store has exactly the CLI's app, as created,
// in the project "Gatehouse" of the default organization, and one marker.
func wantCLIApp(t *testing.T, st *db.DB) *projects.Client {
	t.Helper()
	ctx := context.Background()
	c, err := (&projects.Queries{DB: st}).AppByClientID(ctx, bootstrap.CLIClientID)
	if err != nil {
		t.Fatalf("the CLI's app: %v", err)
	}
	cfg := c.OIDC
	if c.Name != bootstrap.CLIAppName || c.Kind != projects.KindOIDC || !c.AdminClient || !c.Active() || len(c.SecretHash) != 0 || cfg == nil ||
		!slices.Equal(cfg.RedirectURIs, []string{"http://127.0.0.1/callback", "http://[::1]/callback"}) ||
		cfg.AppType != projects.AppTypeNative || cfg.AuthMethod != projects.AuthNone ||
		!slices.Equal(cfg.ResponseTypes, []string{"code"}) || !slices.Equal(cfg.GrantTypes, []string{"authorization_code", "refresh_token"}) ||
		cfg.AccessTokenType != projects.AccessTokenOpaque || cfg.DevMode || len(cfg.Compliance()) != 0 {
		t.Fatalf("the CLI's app = %+v, config %+v", c.App, cfg)
	}
	var project struct {
		Name string `db:"name"`
		Org  string `db:"org_name"`
	}
	if err := st.Get(ctx, &project, `SELECT p.name, o.name AS org_name FROM projects p JOIN orgs o ON o.id = p.org_id WHERE p.id = ?`, c.ProjectID); err != nil {
		t.Fatal(err)
	}
	if project.Name != bootstrap.CLIProjectName || project.Org != bootstrap.OrgName {
		t.Fatalf("the CLI's app is in project %q of %q; want %q of %q", project.Name, project.Org, bootstrap.CLIProjectName, bootstrap.OrgName)
	}
	var apps, marks int
	_ = st.Get(ctx, &apps, `SELECT COUNT(*) FROM apps WHERE name = ?`, bootstrap.CLIAppName)
	_ = st.Get(ctx, &marks, `SELECT COUNT(*) FROM events WHERE event_type = ?`, bootstrap.EventCLIAppEnsured)
	if apps != 1 || marks != 1 {
		t.Fatalf("%d CLI apps and %d markers; want one of each", apps, marks)
	}
	return c
}

func eventCount(t *testing.T, st *db.DB) int {
	t.Helper()
	var n int
	if err := st.Get(context.Background(), &n, `SELECT COUNT(*) FROM events`); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestCLIApp(t *testing.T) {
	storetest.Run(t, func(t *testing.T, d db.Dialect) {
		ctx := context.Background()

		t.Run("first start", func(t *testing.T) {
			st, o := cliStore(t, d)
			if err := bootstrap.Run(ctx, o); err != nil {
				t.Fatal(err)
			}
			wantCLIApp(t, st)
			n := eventCount(t, st)
			if err := bootstrap.Run(ctx, o); err != nil {
				t.Fatal(err)
			}
			wantCLIApp(t, st)
			if eventCount(t, st) != n {
				t.Fatal("a second start added events")
			}
		})

		t.Run("upgrade of a store bootstrapped without it", func(t *testing.T) {
			st, o := cliStore(t, d)
			if _, err := bootstrap.FirstStart(ctx, o); err != nil { // what earlier versions did
				t.Fatal(err)
			}
			if _, err := (&projects.Queries{DB: st}).AppByClientID(ctx, bootstrap.CLIClientID); err == nil {
				t.Fatal("the CLI's app exists before the upgrade")
			}
			if err := bootstrap.Run(ctx, o); err != nil {
				t.Fatal(err)
			}
			wantCLIApp(t, st)
			n := eventCount(t, st)
			if err := bootstrap.Run(ctx, o); err != nil {
				t.Fatal(err)
			}
			if eventCount(t, st) != n {
				t.Fatal("a second start added events")
			}
		})

		t.Run("an admin's project of that name gets the app", func(t *testing.T) {
			st, o := cliStore(t, d)
			orgID, err := bootstrap.FirstStart(ctx, o)
			if err != nil {
				t.Fatal(err)
			}
			mine, _, err := (&projects.Commands{ES: o.ES}).AddProject(ctx, "admin", orgID, projects.ProjectAdded{Name: bootstrap.CLIProjectName})
			if err != nil {
				t.Fatal(err)
			}
			if err := bootstrap.Run(ctx, o); err != nil {
				t.Fatal(err)
			}
			if c := wantCLIApp(t, st); c.ProjectID != mine {
				t.Fatalf("app in project %s; want the existing %s", c.ProjectID, mine)
			}
		})

		t.Run("replicas upgrading at once create it once", func(t *testing.T) {
			for range 3 {
				st, o := cliStore(t, d)
				if _, err := bootstrap.FirstStart(ctx, o); err != nil {
					t.Fatal(err)
				}
				var wg sync.WaitGroup
				errs := make([]error, 4)
				for i := range errs {
					wg.Add(1)
					go func() {
						defer wg.Done()
						errs[i] = bootstrap.Run(ctx, o)
					}()
				}
				wg.Wait()
				for i, err := range errs {
					if err != nil {
						t.Fatalf("replica %d: %v", i, err)
					}
				}
				wantCLIApp(t, st)
			}
		})

		t.Run("removed or deactivated by an admin: reported, not re-created", func(t *testing.T) {
			st, o := cliStore(t, d)
			if err := bootstrap.Run(ctx, o); err != nil {
				t.Fatal(err)
			}
			c := wantCLIApp(t, st)
			var logs bytes.Buffer
			o.Logger = slog.New(slog.NewTextHandler(&logs, nil))
			// No RPC deactivates or removes apps yet; the projection is
			// what such a change would leave.
			if _, err := st.Exec(ctx, `UPDATE apps SET state = ? WHERE id = ?`, projects.StateInactive, c.ID); err != nil {
				t.Fatal(err)
			}
			n := eventCount(t, st)
			if err := bootstrap.Run(ctx, o); err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(logs.String(), "level=INFO") || !strings.Contains(logs.String(), "inactive") || eventCount(t, st) != n {
				t.Fatalf("inactive app: log %q, %d new events; want an Info and none", logs.String(), eventCount(t, st)-n)
			}
			logs.Reset()
			if _, err := st.Exec(ctx, `DELETE FROM apps WHERE id = ?`, c.ID); err != nil {
				t.Fatal(err)
			}
			if err := bootstrap.Run(ctx, o); err != nil {
				t.Fatal(err)
			}
			var apps int
			_ = st.Get(ctx, &apps, `SELECT COUNT(*) FROM apps WHERE client_id = ?`, bootstrap.CLIClientID)
			if !strings.Contains(logs.String(), "level=INFO") || !strings.Contains(logs.String(), "removed") || eventCount(t, st) != n || apps != 0 {
				t.Fatalf("removed app: log %q, %d new events, %d apps; want an Info and nothing re-created", logs.String(), eventCount(t, st)-n, apps)
			}
		})

		t.Run("an admin's app of that name: the start goes on", func(t *testing.T) {
			st, o := cliStore(t, d)
			orgID, err := bootstrap.FirstStart(ctx, o)
			if err != nil {
				t.Fatal(err)
			}
			pc := &projects.Commands{ES: o.ES}
			id, _, err := pc.AddProject(ctx, "admin", orgID, projects.ProjectAdded{Name: bootstrap.CLIProjectName})
			if err != nil {
				t.Fatal(err)
			}
			p, err := (&projects.Queries{DB: st}).Project(ctx, orgID, id)
			if err != nil {
				t.Fatal(err)
			}
			cfg := bootstrap.CLIApp().OIDC
			cfg.Normalize()
			if _, _, err := pc.AddOIDCApp(ctx, "admin", p, bootstrap.CLIAppName, cfg); err != nil {
				t.Fatal(err)
			}
			var logs bytes.Buffer
			o.Logger = slog.New(slog.NewTextHandler(&logs, nil))
			if err := bootstrap.Run(ctx, o); err != nil {
				t.Fatalf("start: %v", err)
			}
			var marks int
			_ = st.Get(ctx, &marks, `SELECT COUNT(*) FROM events WHERE event_type = ?`, bootstrap.EventCLIAppEnsured)
			if _, err := (&projects.Queries{DB: st}).AppByClientID(ctx, bootstrap.CLIClientID); err == nil || marks != 0 || !strings.Contains(logs.String(), "level=WARN") {
				t.Fatalf("app %v, %d markers, log %q; want no app, no marker, a warning", err, marks, logs.String())
			}
		})
	})
}

// TestBuiltinAppCommands: a built-in app is a public client and
// its fixed client id cannot look like a generated one.
func TestBuiltinAppCommands(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*projects.BuiltinApp)
	}{
		{"secret method", func(a *projects.BuiltinApp) { a.OIDC.AuthMethod = projects.AuthBasic }},
		{"key method", func(a *projects.BuiltinApp) { a.OIDC.AuthMethod = projects.AuthPrivateKeyJWT }},
		{"generated form", func(a *projects.BuiltinApp) { a.ClientID = "123@gatehouse" }},
		{"empty id", func(a *projects.BuiltinApp) { a.ClientID = "" }},
		{"invalid config", func(a *projects.BuiltinApp) { a.OIDC.RedirectURIs = []string{"http://127.0.0.1/cb#frag"} }},
	} {
		a := bootstrap.CLIApp()
		tc.edit(&a)
		if _, err := projects.BuiltinAppCommands("org", nil, bootstrap.CLIProjectName, a); err == nil {
			t.Errorf("%s: accepted", tc.name)
		}
	}
	cmds, err := projects.BuiltinAppCommands("org", nil, bootstrap.CLIProjectName, bootstrap.CLIApp())
	if err != nil || len(cmds) != 2 || cmds[0].Aggregate.ResourceOwner != "org" || cmds[1].Version != 1 ||
		fmt.Sprint(len(cmds[1].Events)) != "2" {
		t.Fatalf("commands %+v, %v; want the project, then the app and its admin flag", cmds, err)
	}
}
