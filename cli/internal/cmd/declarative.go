package cmd

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	"github.com/gatehouse-id/gatehouse/cli/internal/output"
	managementv1 "github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/management/v1"
	"github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/management/v1/managementv1connect"
	"github.com/gatehouse-id/gatehouse/services/directory/apply"
)

// resolveOrg turns --org NAME|ID into an organization id: a name the
// caller can see (ListOrgs) wins; otherwise the value is taken as an id
// and the server decides.
func resolveOrg(ctx context.Context, m managementv1connect.ManagementServiceClient, org string) (string, error) {
	res, err := m.ListOrgs(ctx, &managementv1.ListOrgsRequest{
		Queries: []*managementv1.OrgQuery{{Query: &managementv1.OrgQuery_NameQuery{NameQuery: &managementv1.OrgNameQuery{
			Name: org, Method: managementv1.TextQueryMethod_TEXT_QUERY_METHOD_EQUALS,
		}}}},
	})
	if err != nil {
		return "", fmt.Errorf("--org %s: %w", org, err)
	}
	for _, o := range res.GetResult() {
		if o.GetName() == org {
			return o.GetId(), nil
		}
	}
	return org, nil
}

const applyLong = `apply reads YAML documents (a file, or every .yaml/.yml file of a
directory), compares them with the current state and makes only the
difference: it prints the plan (create, update or unchanged per object),
then applies it. A second run changes nothing and says so.

Each document has a kind, the org it belongs to (its name; not on kind
Org), its natural key, and fields named exactly as in the management API's
JSON for the resource's create request:

  kind          natural key            create request
  Org           name                   AddOrg
  Project       org, name              AddProject
  OIDCApp       org, project, name     AddOIDCApp      (updates: UpdateOIDCAppConfig)
  APIApp        org, project, name     AddAPIApp
  HumanUser     org, userName          AddHumanUser
  MachineUser   org, userName          AddMachineUser
  OIDCIdP       org, name              AddOrgOIDCIDP   (updates: UpdateOrgIDPOIDCConfig)
  UserMetadata  org, userName, key     SetUserMetadata (value is base64)
  OrgMember     org, userName, roles   AddOrgMember

Only the fields a document sets are compared. ${NAME} in a value is the
environment variable NAME (for secrets). Passwords and client secrets are
only used when creating. Client secrets of created applications are written
to --secrets-out (0600), which is required when the plan creates any.`

const applyExample = `  cat > acme.yaml <<'EOF'
  kind: Org
  name: acme
  ---
  kind: Project
  org: acme
  name: Shop
  ---
  kind: OIDCApp
  org: acme
  project: Shop
  name: web
  redirectUris: [https://shop.example.com/callback]
  responseTypes: [OIDC_RESPONSE_TYPE_CODE]
  grantTypes: [OIDC_GRANT_TYPE_AUTHORIZATION_CODE, OIDC_GRANT_TYPE_REFRESH_TOKEN]
  appType: OIDC_APP_TYPE_WEB
  authMethodType: OIDC_AUTH_METHOD_TYPE_BASIC
  EOF
  gatehouse apply -f acme.yaml --dry-run
  gatehouse apply -f acme.yaml --secrets-out acme-secrets.yaml`

func (a *App) declarativeCommands() []*cobra.Command {
	return []*cobra.Command{a.applyCmd(), a.exportCmd()}
}

func (a *App) applyCmd() *cobra.Command {
	var file, secretsOut string
	var dryRun bool
	c := &cobra.Command{
		Use:     "apply -f FILE|DIR",
		Short:   "Create or update resources from YAML documents, idempotently",
		Long:    applyLong,
		Example: applyExample,
		Args:    cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			docs, err := apply.ParsePath(file, os.LookupEnv)
			if err != nil {
				return err
			}
			ctx := c.Context()
			cl, err := a.clients(ctx)
			if err != nil {
				return err
			}
			e := &apply.Engine{API: cl.mgmt}
			plan, err := e.Plan(ctx, docs)
			if err != nil {
				return err
			}
			a.printPlan(plan)
			if dryRun || !plan.Changes() {
				return nil
			}
			if plan.NeedsSecretsOut() && secretsOut == "" {
				return errors.New("the plan creates applications with client secrets, which are shown once: give --secrets-out FILE (nothing was changed)")
			}
			if secretsOut != "" {
				if _, err := os.Stat(secretsOut); err == nil {
					return fmt.Errorf("--secrets-out %s exists; choose a new file (nothing was changed)", secretsOut)
				}
			}
			secrets, err := e.Apply(ctx, plan)
			if len(secrets) > 0 {
				raw, merr := yaml.Marshal(map[string]any{"secrets": secrets})
				if merr == nil {
					merr = writeSecretFile(secretsOut, raw)
				}
				if merr != nil {
					return errors.Join(err, fmt.Errorf("write the secrets: %w", merr))
				}
				fmt.Fprintf(a.Stderr, "Wrote %d client secret(s) to %s (0600).\n", len(secrets), secretsOut)
			}
			if err != nil {
				return err
			}
			create, update, _ := plan.Counts()
			fmt.Fprintf(a.Stdout, "Applied: %d created, %d updated.\n", create, update)
			return nil
		},
	}
	c.Flags().StringVarP(&file, "file", "f", "", "a YAML file, or a directory of them")
	c.Flags().StringVar(&secretsOut, "secrets-out", "", "write the client secrets of created applications here (0600; must not exist)")
	c.Flags().BoolVar(&dryRun, "dry-run", false, "print the plan only")
	_ = c.MarkFlagRequired("file")
	return c
}

func (a *App) printPlan(p *apply.Plan) {
	if a.format != output.Table {
		var rows []any
		for _, s := range p.Steps {
			rows = append(rows, map[string]any{"action": string(s.Action), "kind": s.Doc.Kind, "name": s.Doc.Name(), "changed": s.Changed})
		}
		create, update, unchanged := p.Counts()
		_ = output.PrintValue(a.Stdout, a.format, map[string]any{"steps": rows, "create": create, "update": update, "unchanged": unchanged}, output.View{})
		return
	}
	for _, s := range p.Steps {
		line := fmt.Sprintf("%-9s %s %s", s.Action, s.Doc.Kind, s.Doc.Name())
		if len(s.Changed) > 0 {
			line += " (" + strings.Join(s.Changed, ", ") + ")"
		}
		fmt.Fprintln(a.Stdout, line)
	}
	create, update, unchanged := p.Counts()
	if create+update == 0 {
		fmt.Fprintf(a.Stdout, "No changes: %d unchanged.\n", unchanged)
		return
	}
	fmt.Fprintf(a.Stdout, "Plan: %d to create, %d to update, %d unchanged.\n", create, update, unchanged)
}

func (a *App) exportCmd() *cobra.Command {
	var out string
	c := &cobra.Command{
		Use:   "export --org NAME",
		Short: "Write an organization's resources as YAML that apply accepts",
		Long: `export writes the organization's projects, applications, users, identity
providers, metadata and members as apply documents. Secrets and passwords
are not exported: the API never returns them.`,
		Example: `  gatehouse export --org acme > acme.yaml
  gatehouse apply -f acme.yaml --context staging --secrets-out staging-secrets.yaml`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if a.org == "" {
				return errors.New("--org NAME is required")
			}
			ctx := c.Context()
			org := a.org
			a.org = "" // the engine sets the organization of each call
			cl, err := a.clients(ctx)
			if err != nil {
				return err
			}
			raw, err := (&apply.Engine{API: cl.mgmt}).Export(ctx, org)
			if err != nil {
				return err
			}
			if out == "" {
				_, err = a.Stdout.Write(raw)
				return err
			}
			return os.WriteFile(out, raw, 0o600)
		},
	}
	c.Flags().StringVar(&out, "out", "", "write to this file instead of standard output")
	return c
}
