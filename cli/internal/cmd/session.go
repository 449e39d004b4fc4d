package cmd

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
	"time"

	"connectrpc.com/connect"
	"github.com/spf13/cobra"

	"github.com/gatehouse-id/gatehouse/cli/internal/auth"
	"github.com/gatehouse-id/gatehouse/cli/internal/contexts"
	"github.com/gatehouse-id/gatehouse/cli/internal/output"
	managementv1 "github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/management/v1"
)

func (a *App) sessionCommands() []*cobra.Command {
	return []*cobra.Command{a.loginCmd(), a.logoutCmd(), a.contextCmd(), a.whoamiCmd(), a.tokenCmd(), a.keygenCmd()}
}

func (a *App) loginCmd() *cobra.Command {
	var issuer, keyFile, userID, keyID, name, org, clientID string
	var noBrowser, device bool
	var timeout time.Duration
	c := &cobra.Command{
		Use:   "login --issuer URL [--key-file FILE]",
		Short: "Sign in and save the session as a context",
		Long: `Without --key-file, login signs a person in through the browser: the
authorization code flow with PKCE on a loopback redirect (RFC 8252), with
the native admin app Gatehouse creates at first start (client id
gatehouse-cli). --no-browser prints the URL to open instead.

With --device, a person signs in on another device (RFC 8628, for a
machine without a browser): the CLI shows a URL and a code, the person
opens the URL anywhere, signs in and allows the code, and the CLI gets
the session. The gatehouse-cli app allows it only once an admin adds the
grant OIDC_GRANT_TYPE_DEVICE_CODE to it: a code someone else started is a
lure for an admin's session, so it is off by default.

With --key-file, a machine user signs in with its key (the JWT profile
grant): a JSON key file as Gatehouse writes it, or a PEM private key (from
gatehouse keygen) with --user-id and --key-id.

The session (tokens, the key) is stored 0600 in the contexts file under
a context's name, created or replaced:

  --name NAME        the context NAME, which becomes current
  --context NAME     the context NAME (also GATEHOUSE_CONTEXT); the current
                     context stays current (NAME becomes current only when
                     there is none): switch with gatehouse context use NAME
  neither            the context named by the issuer's host, made current`,
		Example: `  gatehouse login --issuer http://localhost:8080
  gatehouse login --issuer https://id.example.com --no-browser --name prod
  gatehouse login --issuer https://id.example.com --device
  gatehouse login --issuer https://staging.example.com --context staging
  gatehouse login --issuer http://localhost:8080 --key-file data/bootstrap-admin-key.json
  gatehouse login --issuer https://id.example.com --key-file admin-key.pem --user-id 123 --key-id 456`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			u, err := url.Parse(issuer)
			if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
				return fmt.Errorf("--issuer %q: want the issuer URL, e.g. https://id.example.com", issuer)
			}
			issuer = strings.TrimRight(issuer, "/")
			name, use, err := a.loginTarget(c, name, u.Host)
			if err != nil {
				return err
			}
			ctx := c.Context()
			ac := &auth.Client{Issuer: issuer, HTTP: a.HTTP}
			entry := &contexts.Context{Issuer: issuer, Org: org}
			var t *auth.Token
			if keyFile != "" {
				raw, err := loadKeyFile(keyFile, userID, keyID)
				if err != nil {
					return err
				}
				entry.Kind, entry.KeyFile = contexts.KindKey, raw
				if t, err = ac.KeyLogin(ctx, raw); err != nil {
					return fmt.Errorf("login: %w", err)
				}
			} else if device {
				entry.Kind, entry.ClientID = contexts.KindBrowser, clientID
				dl := &auth.DeviceLogin{Client: ac, ClientID: clientID, Timeout: timeout,
					Show: func(uri, code, complete string) {
						fmt.Fprintf(a.Stderr, "To sign in, open this URL on any device with a browser:\n\n  %s\n\nand enter the code  %s\n\n(or open %s)\nAllow it only if you started this sign-in yourself. Waiting...\n\n", uri, code, complete)
					}}
				if t, err = dl.Run(ctx); err != nil {
					var oe *auth.OAuthError
					if errors.As(err, &oe) && oe.Code == "unauthorized_client" {
						return fmt.Errorf("login: %w\nthe %s app does not allow the device flow; an admin adds OIDC_GRANT_TYPE_DEVICE_CODE to its grant types (gatehouse apps update-oidc)", err, clientID)
					}
					return fmt.Errorf("login: %w", err)
				}
			} else {
				entry.Kind, entry.ClientID = contexts.KindBrowser, clientID
				bl := &auth.BrowserLogin{Client: ac, ClientID: clientID, Timeout: timeout}
				open := func(u string) error {
					fmt.Fprintf(a.Stderr, "Open this URL in a browser to sign in:\n\n  %s\n\n", u)
					return nil
				}
				if !noBrowser {
					open = func(u string) error {
						fmt.Fprintf(a.Stderr, "Opening the browser to sign in. If it does not open, visit:\n\n  %s\n\n", u)
						if err := auth.OpenBrowser(u); err != nil {
							fmt.Fprintf(a.Stderr, "(%v)\n", err)
						}
						return nil
					}
				}
				bl.Open = open
				if t, err = bl.Run(ctx); err != nil {
					return fmt.Errorf("login: %w", err)
				}
			}
			entry.AccessToken, entry.RefreshToken, entry.Expiry = t.AccessToken, t.RefreshToken, t.Expiry
			f, err := a.store.Load()
			if err != nil {
				return err
			}
			f.Contexts[name] = entry
			if use || f.Current == "" || f.Contexts[f.Current] == nil {
				f.Current = name
			}
			if err := a.store.Save(f); err != nil {
				return err
			}
			if f.Current == name {
				fmt.Fprintf(a.Stderr, "Signed in to %s; context %q is now current.\n", issuer, name)
			} else {
				fmt.Fprintf(a.Stderr, "Signed in to %s as context %q; the current context is still %q (gatehouse context use %s to switch).\n", issuer, name, f.Current, name)
			}
			return nil
		},
	}
	fl := c.Flags()
	fl.StringVar(&issuer, "issuer", "", "the Gatehouse issuer URL")
	fl.StringVar(&keyFile, "key-file", "", "sign in a machine user with this key file (JSON, or PEM with --user-id and --key-id)")
	fl.StringVar(&userID, "user-id", "", "the machine user's id, for a PEM --key-file")
	fl.StringVar(&keyID, "key-id", "", "the key's id, for a PEM --key-file")
	fl.StringVar(&name, "name", "", "the context's name, made current (default: --context, else the issuer's host)")
	fl.StringVar(&org, "default-org", "", "the context's default organization (name or id)")
	fl.StringVar(&clientID, "client-id", auth.CLIClientID, "the native app used for browser sign-in")
	fl.BoolVar(&noBrowser, "no-browser", false, "print the sign-in URL instead of opening a browser")
	fl.BoolVar(&device, "device", false, "sign in on another device with a code (RFC 8628 device flow)")
	fl.DurationVar(&timeout, "timeout", 5*time.Minute, "how long to wait for the browser (or the device code's approval)")
	c.MarkFlagsMutuallyExclusive("device", "key-file")
	c.MarkFlagsMutuallyExclusive("device", "no-browser")
	_ = c.MarkFlagRequired("issuer")
	return c
}

// loginTarget is the context a login is stored under, and whether it
// becomes current: --name switches to it (as does the default, the
// issuer's host); --context (or GATEHOUSE_CONTEXT) names the context to
// act on, as for every other command, and switches nothing.
func (a *App) loginTarget(c *cobra.Command, name, host string) (string, bool, error) {
	switch {
	case name != "" && c.Flags().Changed("context") && a.ctxName != name:
		return "", false, fmt.Errorf("--name %s and --context %s name different contexts: give one", name, a.ctxName)
	case name != "":
		return name, true, nil
	case a.ctxName != "":
		return a.ctxName, false, nil
	}
	return host, true, nil
}

// loadKeyFile returns a JSON key file, made from a PEM key and the ids
// when the file is PEM.
func loadKeyFile(name, userID, keyID string) ([]byte, error) {
	raw, err := os.ReadFile(name)
	if err != nil {
		return nil, fmt.Errorf("--key-file: %w", err)
	}
	if block, _ := pem.Decode(raw); block != nil {
		if userID == "" || keyID == "" {
			return nil, errors.New("--key-file is a PEM key: give --user-id and --key-id too (the server logs them when it registers GATEHOUSE_BOOTSTRAP_PUBLIC_KEY)")
		}
		raw, err = json.Marshal(auth.KeyFile{Type: "serviceaccount", KeyID: keyID, Key: string(raw), UserID: userID})
		if err != nil {
			return nil, err
		}
	}
	if _, _, err := auth.ParseKeyFile(raw); err != nil {
		return nil, fmt.Errorf("--key-file %s: %w", name, err)
	}
	return raw, nil
}

func (a *App) logoutCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "logout",
		Short: "Revoke the current context's tokens and forget them and its key",
		Long: `logout revokes the refresh token (and with it the access tokens issued
from it) or, for a machine user, the access token, then removes the
tokens, and a machine user's key, from the contexts file: the next
command fails with "not logged in" until gatehouse login. The context
itself is kept (its name, issuer and default organization). The key file
you signed in with is not touched.`,
		Example: `  gatehouse logout
  gatehouse logout --context prod`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			f, err := a.store.Load()
			if err != nil {
				return err
			}
			name, e, err := f.Get(a.ctxName)
			if err != nil {
				return err
			}
			ac := &auth.Client{Issuer: e.Issuer, HTTP: a.HTTP}
			ctx := c.Context()
			switch {
			case e.Kind == contexts.KindKey && e.AccessToken != "" && len(e.KeyFile) > 0:
				err = ac.RevokeWithKey(ctx, e.KeyFile, e.AccessToken)
			case e.RefreshToken != "":
				err = ac.RevokePublic(ctx, e.ClientID, e.RefreshToken, "refresh_token")
				if err == nil && e.AccessToken != "" {
					err = ac.RevokePublic(ctx, e.ClientID, e.AccessToken, "access_token")
				}
			}
			if err != nil {
				return fmt.Errorf("logout: revoke: %w", err)
			}
			// The copy of the key is forgotten too: with it, the next command
			// would sign the machine user in again by itself.
			e.AccessToken, e.RefreshToken, e.Expiry, e.KeyFile = "", "", time.Time{}, nil
			if err := a.store.Save(f); err != nil {
				return err
			}
			fmt.Fprintf(a.Stderr, "Signed out of context %q.\n", name)
			return nil
		},
	}
}

func (a *App) contextCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "context",
		Short: "List, switch and delete the saved contexts",
		Example: `  gatehouse context list
  gatehouse context use prod`,
	}
	list := &cobra.Command{
		Use:     "list",
		Short:   "List the contexts",
		Example: "  gatehouse context list -o json",
		Args:    cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			f, err := a.store.Load()
			if err != nil {
				return err
			}
			var rows []any
			for _, n := range f.Names() {
				e := f.Contexts[n]
				rows = append(rows, map[string]any{
					"name": n, "issuer": e.Issuer, "kind": e.Kind, "org": e.Org,
					"current": n == f.Current, "signedIn": e.AccessToken != "" || e.RefreshToken != "" || len(e.KeyFile) > 0,
				})
			}
			return output.PrintValue(a.Stdout, a.format, map[string]any{"contexts": rows},
				output.View{Rows: "contexts", Columns: output.Cols("CURRENT=current", "NAME=name", "ISSUER=issuer", "KIND=kind", "ORG=org", "SIGNED IN=signedIn")})
		},
	}
	use := &cobra.Command{
		Use:               "use NAME",
		Short:             "Make a context current",
		Example:           "  gatehouse context use prod",
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: a.completeContexts,
		RunE: func(_ *cobra.Command, args []string) error {
			f, err := a.store.Load()
			if err != nil {
				return err
			}
			if _, ok := f.Contexts[args[0]]; !ok {
				return fmt.Errorf("no context %q (gatehouse context list)", args[0])
			}
			f.Current = args[0]
			return a.store.Save(f)
		},
	}
	del := &cobra.Command{
		Use:               "delete NAME",
		Short:             "Delete a context (run gatehouse logout first to revoke its tokens)",
		Example:           "  gatehouse context delete old",
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: a.completeContexts,
		RunE: func(_ *cobra.Command, args []string) error {
			f, err := a.store.Load()
			if err != nil {
				return err
			}
			if _, ok := f.Contexts[args[0]]; !ok {
				return fmt.Errorf("no context %q", args[0])
			}
			delete(f.Contexts, args[0])
			if f.Current == args[0] {
				f.Current = ""
			}
			return a.store.Save(f)
		},
	}
	c.AddCommand(list, use, del)
	return c
}

func (a *App) completeContexts(c *cobra.Command, _ []string, _ string) ([]string, cobra.ShellCompDirective) {
	if a.store.Path == "" {
		p, err := contexts.DefaultPath()
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		a.store.Path = p
	}
	f, err := a.store.Load()
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	return f.Names(), cobra.ShellCompDirectiveNoFileComp
}

func (a *App) whoamiCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "whoami",
		Short: "Show who the current context is signed in as",
		Long: `whoami shows the signed-in user (id, name), the organization it belongs
to, and in how many organizations it holds a role (all of them for an IAM
owner). A user without any role is shown too, with a note on standard
error: management commands fail with permission_denied until an
organization owner gives it a role (gatehouse members add).`,
		Example: "  gatehouse whoami -o json",
		Args:    cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			ctx := c.Context()
			// Who the user is does not depend on --org: no organization is
			// selected.
			name, e, cl, err := a.dial(ctx)
			if err != nil {
				return err
			}
			info, err := (&auth.Client{Issuer: e.Issuer, HTTP: a.HTTP}).UserInfo(ctx, e.AccessToken)
			if err != nil {
				return err
			}
			orgID, orgName, err := ownOrg(ctx, cl, info)
			if err != nil {
				return err
			}
			// ListOrgs needs no role: it lists where the caller holds one.
			orgs, err := cl.mgmt.ListOrgs(ctx, &managementv1.ListOrgsRequest{Query: &managementv1.ListQuery{Limit: 1}})
			if err != nil {
				return err
			}
			withRoles := orgs.GetDetails().GetTotalResult()
			v := map[string]any{
				"context": name, "issuer": e.Issuer, "kind": e.Kind,
				"userId": info["sub"], "name": first(info["preferred_username"], info["name"]),
				"orgId": orgID, "orgName": orgName, "orgsWithRoles": withRoles,
				"expiry": e.Expiry.UTC().Format(time.RFC3339),
			}
			if err := output.PrintValue(a.Stdout, a.format, v,
				output.View{Columns: output.Cols("CONTEXT=context", "ISSUER=issuer", "USER ID=userId", "NAME=name", "ORG=orgName", "ORG ID=orgId", "ORGS WITH ROLES=orgsWithRoles")}); err != nil {
				return err
			}
			if withRoles == 0 {
				fmt.Fprintf(a.Stderr, "Note: user %v holds no roles: management commands fail with permission_denied until an organization owner gives it one (gatehouse members add %[1]v --role ROLE --org ORG).\n", info["sub"])
			}
			return nil
		},
	}
}

// ownOrg is the id and name of the organization the user belongs to, from
// the userinfo claims of the resourceowner scope. A session from before
// the CLI asked for that scope gets them from GetMyOrg, which needs a role
// in it: without one they are unknown (nil).
func ownOrg(ctx context.Context, cl *clients, info map[string]any) (any, any, error) {
	if id, ok := info[auth.ResourceOwnerScope+":id"]; ok {
		return id, info[auth.ResourceOwnerScope+":name"], nil
	}
	res, err := cl.mgmt.GetMyOrg(ctx, &managementv1.GetMyOrgRequest{})
	if connect.CodeOf(err) == connect.CodePermissionDenied {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	return res.GetOrg().GetId(), res.GetOrg().GetName(), nil
}

func first(vs ...any) any {
	for _, v := range vs {
		if s, ok := v.(string); ok && s != "" {
			return s
		}
	}
	return nil
}

func (a *App) tokenCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "token",
		Short: "Print a fresh access token for the management API",
		Long: `token prints the current context's access token, refreshed first when it
expires within a minute, for scripts: curl -H "Authorization: Bearer $(gatehouse token)".`,
		Example: `  curl -H "Authorization: Bearer $(gatehouse token)" http://localhost:8080/management/v1/orgs/me`,
		Args:    cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			_, e, err := a.session(c.Context())
			if err != nil {
				return err
			}
			fmt.Fprintln(a.Stdout, e.AccessToken)
			return nil
		},
	}
}

func (a *App) keygenCmd() *cobra.Command {
	var out, pubOut string
	var bits int
	c := &cobra.Command{
		Use:   "keygen --out FILE",
		Short: "Make an RSA key pair for a machine user (e.g. GATEHOUSE_BOOTSTRAP_PUBLIC_KEY)",
		Long: `keygen writes a new RSA private key (PEM, 0600) to --out and its public key
(PEM) to --public-out or standard output. Give the public key to Gatehouse
(GATEHOUSE_BOOTSTRAP_PUBLIC_KEY, or gatehouse users keys add
--public-key); keep the private key to sign in with gatehouse login
--key-file.`,
		Example: `  gatehouse keygen --out ~/.config/gatehouse/admin-key.pem --public-out admin-key.pub.pem
  export GATEHOUSE_BOOTSTRAP_PUBLIC_KEY="$(cat admin-key.pub.pem)"`,
		Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			if bits < 2048 {
				return errors.New("--bits: at least 2048")
			}
			key, err := rsa.GenerateKey(rand.Reader, bits)
			if err != nil {
				return err
			}
			priv := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})
			der, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
			if err != nil {
				return err
			}
			pub := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
			if err := writeSecretFile(out, priv); err != nil {
				return err
			}
			if pubOut == "" {
				_, err = a.Stdout.Write(pub)
				return err
			}
			return os.WriteFile(pubOut, pub, 0o644)
		},
	}
	c.Flags().StringVar(&out, "out", "", "where to write the private key (0600; must not exist)")
	c.Flags().StringVar(&pubOut, "public-out", "", "where to write the public key (default: standard output)")
	c.Flags().IntVar(&bits, "bits", 2048, "RSA key size")
	_ = c.MarkFlagRequired("out")
	return c
}

// writeSecretFile creates a file readable only by its owner; it never
// overwrites one.
func writeSecretFile(name string, content []byte) error {
	f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("write %s: %w", name, err)
	}
	if _, err := f.Write(content); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", name, err)
	}
	return f.Close()
}
