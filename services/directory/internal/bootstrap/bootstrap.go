// Package bootstrap prepares an empty directory on first start (DESIGN.md
// "First start"): the default organization, a human admin with IAM_OWNER
// (password from GATEHOUSE_ADMIN_PASSWORD, or generated and printed once,
// to be changed at first login), and a machine user bootstrap-admin with
// IAM_OWNER whose JSON key file is written to the data directory (0600), so
// an operator can get a management token by the JWT profile grant. With
// GATEHOUSE_BOOTSTRAP_PUBLIC_KEY the operator's own public key is
// registered instead and no private key is written (clusters): the user
// and key ids for the operator's key file are logged.
//
// Each step checks whether it is already done, so a start interrupted
// half-way completes on the next one; an instance.bootstrapped event marks
// the end, after which nothing is ever re-created.
//
// Then, on every start, ensure steps add what later versions provide to
// stores bootstrapped before them, each exactly once per store (an event
// marks it done; what an admin removed later is reported, not re-created):
// the gatehouse CLI's native app (CLIClientID), an admin client in a
// project "Gatehouse" of the default organization.
package bootstrap

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"time"

	"connectrpc.com/connect"

	"github.com/gatehouse-id/gatehouse/pkg/db"
	"github.com/gatehouse-id/gatehouse/pkg/secrets"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/eventstore"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/orgs"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/projects"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/users"
)

// Names of what first start creates.
const (
	OrgName         = "Gatehouse"
	AdminUserName   = "admin"
	MachineUserName = "bootstrap-admin"
	KeyFileName     = "bootstrap-admin-key.json"
	// PasswordFileName holds a generated admin password (0600).
	PasswordFileName = "admin-password.txt"

	eventBootstrapped = "instance.bootstrapped"
)

// The gatehouse CLI's app: a public native client (PKCE, loopback
// redirect on any port, RFC 8252) that is an admin client, so a person
// signs in through the browser and gets a management token with that
// person's roles. Its client_id is fixed so the CLI needs no configuration.
const (
	CLIProjectName = "Gatehouse"
	CLIAppName     = "gatehouse-cli"
	CLIClientID    = "gatehouse-cli"
	// CLIRedirectIPv4 and CLIRedirectIPv6 are its redirect URIs; the CLI
	// adds the port it listens on.
	CLIRedirectIPv4 = "http://127.0.0.1/callback"
	CLIRedirectIPv6 = "http://[::1]/callback"

	eventCLIAppEnsured = "instance.cli_app_ensured"
)

// Register adds the marker events' reducers (they project nothing).
func Register(es *eventstore.Store) {
	es.Register(eventBootstrapped, func(context.Context, db.Querier, eventstore.Event) error { return nil })
	es.Register(eventCLIAppEnsured, func(context.Context, db.Querier, eventstore.Event) error { return nil })
}

// Options configure Run.
type Options struct {
	ES            *eventstore.Store
	IssuerHost    string
	DataDir       string
	AdminPassword string // empty: generate one and print it to Console
	// PublicKey (PEM), when set, is registered as bootstrap-admin's key
	// and no private key file is written (GATEHOUSE_BOOTSTRAP_PUBLIC_KEY).
	PublicKey string
	// Apply, when set, applies GATEHOUSE_BOOTSTRAP_FILE as the machine
	// admin, last, before first start is marked done: a start that fails
	// in it applies the rest next time (apply is idempotent).
	Apply   func(ctx context.Context, machineUserID string) error
	Console io.Writer // where a generated password is printed (stderr)
	Logger  *slog.Logger
	Now     func() time.Time
}

// Run bootstraps an empty store, then runs the ensure steps; on a store
// where all is done it changes nothing.
func Run(ctx context.Context, o Options) error {
	var err error
	for attempt := 0; attempt < 5; attempt++ {
		if err = run(ctx, o); err == nil {
			return nil
		}
		// Another replica bootstrapping at the same moment wins some steps
		// (a name, a client id, an aggregate's version; the CLI's project
		// name is checked by its reducer); the steps are idempotent, so run
		// again.
		if !raced(err) {
			return err
		}
		time.Sleep(time.Duration(100*(attempt+1)) * time.Millisecond)
	}
	return err
}

// raced reports an error of a step another replica won: the store's own,
// or the API error a command turned it into (Aborted for a concurrent
// change, AlreadyExists for a taken name).
func raced(err error) bool {
	switch connect.CodeOf(err) {
	case connect.CodeAborted, connect.CodeAlreadyExists:
		return true
	}
	return errors.Is(err, eventstore.ErrUnique) || errors.Is(err, eventstore.ErrConcurrent) || errors.Is(err, projects.ErrNameTaken)
}

func run(ctx context.Context, o Options) error {
	orgID, err := firstStart(ctx, o)
	if err != nil {
		return err
	}
	return ensureCLIApp(ctx, o, orgID)
}

// firstStart bootstraps an empty store and returns the default
// organization's id (read from the marker once bootstrapped).
func firstStart(ctx context.Context, o Options) (string, error) {
	d := o.ES.DB()
	var marks []string
	if err := d.Select(ctx, &marks, `SELECT payload FROM events WHERE event_type = ?`, eventBootstrapped); err != nil {
		return "", fmt.Errorf("bootstrap: %w", err)
	}
	if len(marks) > 0 {
		var m struct {
			OrgID string `json:"orgId"`
		}
		if err := json.Unmarshal([]byte(marks[0]), &m); err != nil {
			return "", fmt.Errorf("bootstrap: marker: %w", err)
		}
		return m.OrgID, nil
	}
	o.Logger.Info("first start: creating the default organization and admin users")
	oq := &orgs.Queries{DB: d}
	uq := &users.Queries{DB: d}
	oc := &orgs.Commands{ES: o.ES, IssuerHost: o.IssuerHost}
	uc := &users.Commands{ES: o.ES, Q: uq}
	const editor = "bootstrap"

	// 1. The organization.
	var orgID string
	err := d.Get(ctx, &orgID, `SELECT id FROM orgs WHERE name = ?`, OrgName)
	if errors.Is(err, sql.ErrNoRows) {
		orgID, _, err = oc.AddOrg(ctx, editor, OrgName, nil)
	}
	if err != nil {
		return "", fmt.Errorf("bootstrap org: %w", err)
	}
	org, err := oq.Get(ctx, orgID)
	if err != nil {
		return "", fmt.Errorf("bootstrap org: %w", err)
	}

	// 2. The human admin.
	adminID, err := userID(ctx, d, orgID, AdminUserName)
	if err != nil {
		return "", err
	}
	if adminID == "" {
		pw, generated := o.AdminPassword, false
		if pw == "" {
			// Random, and meeting the default policy's character classes.
			pw, generated = secrets.RandomToken(15)+"-Aa1", true
		}
		if generated {
			// Written before the user exists, so a password nobody can read
			// is never set.
			if err := writeKeyFile(filepath.Join(o.DataDir, PasswordFileName), []byte(pw+"\n")); err != nil {
				return "", err
			}
		}
		hash, err := uc.NewPasswordHash(ctx, "", pw, org.PasswordPolicy)
		if err != nil {
			return "", fmt.Errorf("bootstrap: GATEHOUSE_ADMIN_PASSWORD does not meet the password policy: %w", err)
		}
		adminID, _, err = uc.AddHuman(ctx, editor, org, users.HumanAdded{
			UserName: AdminUserName, FirstName: "Gatehouse", LastName: "Admin", DisplayName: "Gatehouse Admin",
			Email: AdminUserName + "@" + org.PrimaryDomain, EmailVerified: true, EmailProof: users.ProofInstance,
			PasswordHash: hash, PasswordChangeRequired: generated,
		})
		if err != nil {
			return "", fmt.Errorf("bootstrap admin: %w", err)
		}
		if generated && o.Console != nil {
			// Never printed among the logs: only where the file is.
			fmt.Fprintf(o.Console, "\n  Gatehouse first start: sign in as %s@%s with the password in\n\n      %s\n\n  (0600). It must be changed at the first login; then delete the file.\n\n",
				AdminUserName, org.PrimaryDomain, filepath.Join(o.DataDir, PasswordFileName))
		}
	}

	// 3. The machine admin and its key file.
	machineID, err := userID(ctx, d, orgID, MachineUserName)
	if err != nil {
		return "", err
	}
	if machineID == "" {
		machineID, _, err = uc.AddMachine(ctx, editor, org, users.MachineAdded{
			UserName: MachineUserName, Name: "Bootstrap admin", Description: "Created at first start; its key file gets management tokens.",
		})
		if err != nil {
			return "", fmt.Errorf("bootstrap machine user: %w", err)
		}
	}
	keyPath := filepath.Join(o.DataDir, KeyFileName)
	var keys int
	if err := d.Get(ctx, &keys, `SELECT COUNT(*) FROM machine_keys WHERE user_id = ?`, machineID); err != nil {
		return "", fmt.Errorf("bootstrap: %w", err)
	}
	if keys == 0 {
		machine, err := uq.Get(ctx, machineID)
		if err != nil {
			return "", fmt.Errorf("bootstrap: %w", err)
		}
		if o.PublicKey != "" {
			// The operator keeps the private half: nothing secret is
			// written, and the ids it needs for its key file are logged.
			pub, err := users.ParsePublicKey([]byte(o.PublicKey))
			if err != nil {
				return "", fmt.Errorf("bootstrap: GATEHOUSE_BOOTSTRAP_PUBLIC_KEY: %w", err)
			}
			keyID, _, _, err := uc.AddMachineKey(ctx, editor, machine, pub, time.Time{}, o.Now())
			if err != nil {
				return "", fmt.Errorf("bootstrap machine key: %w", err)
			}
			o.Logger.Info("first start: registered GATEHOUSE_BOOTSTRAP_PUBLIC_KEY for the bootstrap admin",
				"user_id", machineID, "key_id", keyID,
				"login", "gatehouse login --issuer ISSUER --key-file PRIVATE-KEY.pem --user-id "+machineID+" --key-id "+keyID)
		} else {
			_, file, _, err := uc.AddMachineKey(ctx, editor, machine, "", time.Time{}, o.Now())
			if err != nil {
				return "", fmt.Errorf("bootstrap machine key: %w", err)
			}
			if err := writeKeyFile(keyPath, file); err != nil {
				return "", err
			}
			o.Logger.Info("first start: wrote the bootstrap admin key file", "path", keyPath)
		}
	}

	// 4. Roles: IAM_OWNER for both, ORG_OWNER of the default org for the admin.
	if _, err := oq.Member(ctx, orgID, adminID); errors.Is(err, db.ErrNotFound) {
		if org, err = oq.Get(ctx, orgID); err != nil {
			return "", err
		}
		if _, err := oc.AddMember(ctx, editor, org, adminID, []string{orgs.RoleOrgOwner}); err != nil {
			return "", fmt.Errorf("bootstrap org owner: %w", err)
		}
	} else if err != nil {
		return "", err
	}
	for _, id := range []string{adminID, machineID} {
		roles, err := oq.InstanceRoles(ctx, id)
		if err != nil {
			return "", err
		}
		if slices.Contains(roles, orgs.RoleIAMOwner) {
			continue
		}
		v, err := oq.InstanceVersion(ctx)
		if err != nil {
			return "", err
		}
		if _, err := o.ES.Push(ctx, editor, orgs.InstanceMemberCommand(v, id, []string{orgs.RoleIAMOwner})); err != nil {
			return "", fmt.Errorf("bootstrap IAM_OWNER: %w", err)
		}
	}

	if o.Apply != nil {
		if err := o.Apply(ctx, machineID); err != nil {
			return "", fmt.Errorf("GATEHOUSE_BOOTSTRAP_FILE: %w", err)
		}
	}

	v, err := oq.InstanceVersion(ctx)
	if err != nil {
		return "", err
	}
	_, err = o.ES.Push(ctx, editor, eventstore.Command{
		Aggregate: eventstore.Aggregate{Type: orgs.AggregateInstance, ID: orgs.InstanceID},
		Version:   v,
		Events:    []eventstore.Pending{{Type: eventBootstrapped, Payload: map[string]string{"orgId": orgID}}},
	})
	return orgID, err
}

func userID(ctx context.Context, d *db.DB, orgID, userName string) (string, error) {
	var id string
	err := d.Get(ctx, &id, `SELECT id FROM users WHERE org_id = ? AND user_name = ?`, orgID, userName)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("bootstrap: %w", err)
	}
	return id, nil
}

func writeKeyFile(path string, content []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("bootstrap: create data dir: %w", err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("bootstrap: write key file: %w", err)
	}
	if _, err := f.Write(content); err != nil {
		f.Close()
		return fmt.Errorf("bootstrap: write key file: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("bootstrap: write key file: %w", err)
	}
	return os.Chmod(path, 0o600)
}
