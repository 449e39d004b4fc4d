// Package cmd is the gatehouse command line: contexts and sign-in, one
// command per management RPC grouped by resource family, and declarative
// apply/export. Every call goes through the generated Connect clients.
package cmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"connectrpc.com/connect"
	"github.com/mattn/go-isatty"
	"github.com/spf13/cobra"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/gatehouse-id/gatehouse/cli/internal/auth"
	"github.com/gatehouse-id/gatehouse/cli/internal/contexts"
	"github.com/gatehouse-id/gatehouse/cli/internal/output"
	"github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/admin/v1/adminv1connect"
	"github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/management/v1/managementv1connect"
)

// OrgHeader selects the organization a management call acts on.
const OrgHeader = "x-service-orgid"

// App is one run of the command line.
type App struct {
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	// IsTerminal reports whether Stdout is a terminal (table by default).
	IsTerminal bool
	HTTP       *http.Client

	// rpcs are the request messages of every RPC a command calls.
	rpcs []protoreflect.FullName

	store   contexts.Store
	ctxName string
	org     string
	format  string
	cfgPath string
}

// Main runs the command line and returns the exit status: 0, or 1 after
// printing the error as one line.
func Main(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	a := &App{Stdin: stdin, Stdout: stdout, Stderr: stderr, HTTP: &http.Client{Timeout: 60 * time.Second}}
	if f, ok := stdout.(*os.File); ok {
		a.IsTerminal = isatty.IsTerminal(f.Fd())
	}
	root := a.Root()
	root.SetArgs(args)
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	if err := root.ExecuteContext(context.Background()); err != nil {
		fmt.Fprintln(stderr, FormatError(err))
		return 1
	}
	return 0
}

// FormatError is the one-line form of an error; an API error reads
// "code: message", as connect formats it.
func FormatError(err error) string {
	return "error: " + strings.Join(strings.Fields(err.Error()), " ")
}

// Root builds the command tree.
func (a *App) Root() *cobra.Command {
	root := &cobra.Command{
		Use:   "gatehouse",
		Short: "Administer a Gatehouse identity provider",
		Long: `gatehouse administers a Gatehouse instance through its management API:
sign in (a person through the browser, a machine user with its key file),
then manage organizations, users, projects, applications, identity
providers and signing keys, or apply a declarative YAML description.`,
		Example: `  gatehouse login --issuer http://localhost:8080
  gatehouse users list --org acme
  gatehouse apply -f gatehouse.yaml --dry-run`,
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(c *cobra.Command, _ []string) error {
			if a.cfgPath == "" {
				p, err := contexts.DefaultPath()
				if err != nil {
					return err
				}
				a.cfgPath = p
			}
			a.store = contexts.Store{Path: a.cfgPath}
			if a.format == "" {
				a.format = output.JSON
				if a.IsTerminal {
					a.format = output.Table
				}
			}
			switch a.format {
			case output.JSON, output.YAML, output.Table:
				return nil
			}
			if _, ok := output.JSONPath(a.format); ok {
				return nil
			}
			return fmt.Errorf("-o %q: want table, json, yaml or jsonpath={.field}", a.format)
		},
	}
	pf := root.PersistentFlags()
	pf.StringVar(&a.ctxName, "context", os.Getenv("GATEHOUSE_CONTEXT"), "the context to use (default: the current one; env GATEHOUSE_CONTEXT)")
	pf.StringVar(&a.org, "org", "", "the organization to act on, by name or id (sent as "+OrgHeader+"; default: the context's, else your own)")
	pf.StringVarP(&a.format, "output", "o", "", "output format: table, json, yaml, or jsonpath={.field} to print one value (default: table on a terminal, json otherwise)")
	pf.StringVar(&a.cfgPath, "config", os.Getenv("GATEHOUSE_CONFIG"), "the contexts file (default $XDG_CONFIG_HOME/gatehouse/contexts.json; env GATEHOUSE_CONFIG)")
	root.AddGroup(&cobra.Group{ID: "session", Title: "Sign-in and contexts:"},
		&cobra.Group{ID: "resources", Title: "Resources:"},
		&cobra.Group{ID: "declarative", Title: "Declarative:"})
	for _, c := range a.sessionCommands() {
		c.GroupID = "session"
		root.AddCommand(c)
	}
	for _, c := range a.resourceCommands() {
		c.GroupID = "resources"
		root.AddCommand(c)
	}
	for _, c := range a.declarativeCommands() {
		c.GroupID = "declarative"
		root.AddCommand(c)
	}
	root.Version = version()
	root.SetVersionTemplate("{{.Version}}\n")
	root.AddCommand(a.versionCmd())
	// cobra adds its completion command only at Execute: add it now, so
	// that it refuses a mistyped shell like the others.
	root.InitDefaultCompletionCmd()
	refuseUnknownCommands(root)
	return root
}

// refuseUnknownCommands makes every command group fail on a sub-command
// it does not have. cobra checks only the root's arguments: for a group
// (no Run of its own) it prints the help and exits 0, so a typo in a
// script (gatehouse users lst) would pass unnoticed.
func refuseUnknownCommands(c *cobra.Command) {
	for _, sub := range c.Commands() {
		refuseUnknownCommands(sub)
	}
	if !c.HasSubCommands() || c.Runnable() {
		return
	}
	c.Args = cobra.ArbitraryArgs
	c.DisableFlagsInUseLine = true // its usage: "gatehouse users [command]"
	c.RunE = func(c *cobra.Command, args []string) error {
		if len(args) == 0 {
			return c.Help()
		}
		return unknownCommand(c, args[0])
	}
}

// unknownCommand is cobra's error for the root's unknown sub-command,
// with its suggestions.
func unknownCommand(c *cobra.Command, name string) error {
	if c.SuggestionsMinimumDistance <= 0 {
		c.SuggestionsMinimumDistance = 2
	}
	msg := fmt.Sprintf("unknown command %q for %q", name, c.CommandPath())
	if s := c.SuggestionsFor(name); len(s) > 0 {
		last := len(s) - 1
		if last > 0 {
			s = append(s[:last-1:last-1], strings.Join(s[last-1:], " or "))
		}
		msg += "; did you mean " + strings.Join(s, ", ") + "?"
	}
	return errors.New(msg)
}

func (a *App) print(m proto.Message, view output.View) error {
	return output.Print(a.Stdout, a.format, m, view)
}

// clients are the API clients of the current context, signed in.
type clients struct {
	mgmt   managementv1connect.ManagementServiceClient
	admin  adminv1connect.AdminServiceClient
	issuer string
	// orgID is the resolved --org, "" for the caller's own.
	orgID string
}

// session loads the context and makes sure its access token is fresh,
// refreshing (and saving) it when it is about to expire.
func (a *App) session(ctx context.Context) (string, *contexts.Context, error) {
	f, err := a.store.Load()
	if err != nil {
		return "", nil, err
	}
	name, c, err := f.Get(a.ctxName)
	if err != nil {
		return "", nil, err
	}
	if c.AccessToken != "" && time.Until(c.Expiry) > time.Minute {
		return name, c, nil
	}
	if c.AccessToken == "" && c.RefreshToken == "" && len(c.KeyFile) == 0 {
		// Signed out (gatehouse logout): nothing signs in again by itself.
		return "", nil, notLoggedIn(name, c)
	}
	ac := &auth.Client{Issuer: c.Issuer, HTTP: a.HTTP}
	var t *auth.Token
	switch {
	case c.Kind == contexts.KindKey && len(c.KeyFile) > 0:
		t, err = ac.KeyLogin(ctx, c.KeyFile)
	case c.RefreshToken != "":
		t, err = ac.Refresh(ctx, c.ClientID, c.RefreshToken)
	default:
		return "", nil, fmt.Errorf("context %s: the session has expired; run gatehouse login", name)
	}
	if err != nil {
		var oe *auth.OAuthError
		if errors.As(err, &oe) && oe.Code == "invalid_grant" {
			return "", nil, fmt.Errorf("context %s: the session has ended (%v); run gatehouse login", name, err)
		}
		return "", nil, fmt.Errorf("context %s: refresh the token: %w", name, err)
	}
	c.AccessToken, c.Expiry = t.AccessToken, t.Expiry
	if t.RefreshToken != "" {
		c.RefreshToken = t.RefreshToken
	}
	if err := a.store.Save(f); err != nil {
		return "", nil, err
	}
	return name, c, nil
}

// notLoggedIn says how to sign a signed-out context in again.
func notLoggedIn(name string, c *contexts.Context) error {
	how := "gatehouse login --context " + name + " --issuer " + c.Issuer
	if c.Kind == contexts.KindKey {
		how += " --key-file FILE"
	}
	return fmt.Errorf("context %s: not logged in; run %s", name, how)
}

// clients signs in and makes the API clients for --org (or the context's
// default organization).
func (a *App) clients(ctx context.Context) (*clients, error) {
	_, c, cl, err := a.dial(ctx)
	if err != nil {
		return nil, err
	}
	org := a.org
	if org == "" {
		org = c.Org
	}
	if org != "" {
		if cl.orgID, err = resolveOrg(ctx, cl.mgmt, org); err != nil {
			return nil, err
		}
	}
	return cl, nil
}

// dial signs in and makes the API clients, acting on the caller's own
// organization until orgID is set.
func (a *App) dial(ctx context.Context) (string, *contexts.Context, *clients, error) {
	name, c, err := a.session(ctx)
	if err != nil {
		return "", nil, nil, err
	}
	cl := &clients{issuer: c.Issuer}
	bearer := connect.UnaryInterceptorFunc(func(next connect.UnaryFunc) connect.UnaryFunc {
		return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
			req.Header().Set("Authorization", "Bearer "+c.AccessToken)
			// A call that names its organization itself (apply) keeps it.
			if cl.orgID != "" && req.Header().Get(OrgHeader) == "" {
				req.Header().Set(OrgHeader, cl.orgID)
			}
			return next(ctx, req)
		}
	})
	base := strings.TrimRight(c.Issuer, "/")
	cl.mgmt = managementv1connect.NewManagementServiceClient(a.HTTP, base, connect.WithInterceptors(bearer))
	cl.admin = adminv1connect.NewAdminServiceClient(a.HTTP, base, connect.WithInterceptors(bearer))
	return name, c, cl, nil
}
