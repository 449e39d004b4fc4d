package clients_test

import (
	"context"
	"errors"
	"net/http"
	"testing"

	"connectrpc.com/connect"

	"github.com/gatehouse-id/gatehouse/pkg/db"
	directoryv1 "github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/directory/v1"
	"github.com/gatehouse-id/gatehouse/pkg/oauth"
	"github.com/gatehouse-id/gatehouse/pkg/secrets"
	"github.com/gatehouse-id/gatehouse/services/tokens/internal/clients"
	"github.com/gatehouse-id/gatehouse/services/tokens/internal/introspection/tokentest"
)

const (
	app     = directoryv1.ClientKind_CLIENT_KIND_OIDC_APP
	machine = directoryv1.ClientKind_CLIENT_KIND_MACHINE_USER
)

var all = []clients.Method{clients.SecretBasic, clients.SecretPost, clients.None, clients.PrivateKeyJWT}

// Authenticate accepts exactly one method, the one the client registered
// (a machine user's secret by either secret method), with the right
// credential; every other case is an OAuth error of the documented kind,
// and a directory outage is temporarily_unavailable, never invalid_client.
func TestAuthenticate(t *testing.T) {
	t.Parallel()
	env := tokentest.New(t, db.SQLite, tokentest.Options{})
	basic := env.AddClient(t, "web-basic", "p1", app, directoryv1.AuthMethod_AUTH_METHOD_CLIENT_SECRET_BASIC)
	post := env.AddClient(t, "web-post", "p1", app, directoryv1.AuthMethod_AUTH_METHOD_CLIENT_SECRET_POST)
	public := env.AddClient(t, "spa", "p1", app, directoryv1.AuthMethod_AUTH_METHOD_NONE)
	keyed := env.AddClient(t, "web-key", "p1", app, directoryv1.AuthMethod_AUTH_METHOD_PRIVATE_KEY_JWT)
	robot := env.AddClient(t, "robot", "", machine, directoryv1.AuthMethod_AUTH_METHOD_CLIENT_SECRET_BASIC)
	gone := env.AddClient(t, "gone", "p1", app, directoryv1.AuthMethod_AUTH_METHOD_CLIENT_SECRET_POST)
	gone.Active = false
	env.Dir.PutClient(gone.Client)

	viaBasic := func(id, secret string) clients.Credentials {
		return clients.Credentials{Basic: true, BasicUser: id, BasicPass: secret}
	}
	for _, tc := range []struct {
		name    string
		cr      clients.Credentials
		allowed []clients.Method
		client  string
		method  clients.Method
		code    string // "" when accepted
		status  int
	}{
		{"basic", viaBasic(basic.GetClientId(), basic.Secret), all, "web-basic", clients.SecretBasic, "", 0},
		{"post", clients.Credentials{ClientID: post.GetClientId(), ClientSecret: post.Secret}, all, "web-post", clients.SecretPost, "", 0},
		{"none", clients.Credentials{ClientID: public.GetClientId()}, all, "spa", clients.None, "", 0},
		{"private_key_jwt", clients.Credentials{AssertionType: clients.AssertionType, Assertion: env.Assertion(t, keyed, "")}, all, "web-key", clients.PrivateKeyJWT, "", 0},
		{"machine user's secret by post", clients.Credentials{ClientID: robot.GetClientId(), ClientSecret: robot.Secret}, all, "robot", clients.SecretPost, "", 0},
		{"wrong secret over Basic: 401", viaBasic(basic.GetClientId(), "wrong"), all, "", 0, oauth.InvalidClient, http.StatusUnauthorized},
		{"wrong secret in the body: 400", clients.Credentials{ClientID: post.GetClientId(), ClientSecret: "wrong"}, all, "", 0, oauth.InvalidClient, http.StatusBadRequest},
		{"another method than registered", clients.Credentials{ClientID: basic.GetClientId(), ClientSecret: basic.Secret}, all, "", 0, oauth.InvalidClient, http.StatusBadRequest},
		{"public client claiming none for a confidential one", clients.Credentials{ClientID: basic.GetClientId()}, all, "", 0, oauth.InvalidClient, http.StatusBadRequest},
		{"method not accepted here", clients.Credentials{ClientID: public.GetClientId()}, []clients.Method{clients.SecretBasic}, "", 0, oauth.InvalidClient, http.StatusBadRequest},
		{"two methods at once", clients.Credentials{Basic: true, BasicUser: "web-basic", BasicPass: basic.Secret, ClientSecret: "x", ClientID: "web-basic"}, all, "", 0, oauth.InvalidRequest, http.StatusBadRequest},
		{"client_id beside Basic differs", clients.Credentials{Basic: true, BasicUser: "web-basic", BasicPass: basic.Secret, ClientID: "spa"}, all, "", 0, oauth.InvalidRequest, http.StatusBadRequest},
		{"malformed Basic escape", viaBasic("web%zz", "x"), all, "", 0, oauth.InvalidRequest, http.StatusBadRequest},
		{"wrong assertion type", clients.Credentials{ClientID: "web-key", AssertionType: "urn:other", Assertion: "x"}, all, "", 0, oauth.InvalidRequest, http.StatusBadRequest},
		{"assertion of another key", clients.Credentials{ClientID: "web-key", AssertionType: clients.AssertionType, Assertion: env.Assertion(t, &tokentest.Client{Client: keyed.Client, Key: mustOtherKey(t, env).Key, KeyID: keyed.KeyID}, "")}, all, "", 0, oauth.InvalidClient, http.StatusBadRequest},
		{"unknown client", clients.Credentials{ClientID: "nobody", ClientSecret: "x"}, all, "", 0, oauth.InvalidClient, http.StatusBadRequest},
		{"inactive client", clients.Credentials{ClientID: gone.GetClientId(), ClientSecret: gone.Secret}, all, "", 0, oauth.InvalidClient, http.StatusBadRequest},
		{"no credentials", clients.Credentials{}, all, "", 0, oauth.InvalidClient, http.StatusBadRequest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := env.Auth.Authenticate(context.Background(), tc.cr, tc.allowed...)
			if tc.code == "" {
				if err != nil || got.Client.GetClientId() != tc.client || got.Method != tc.method {
					t.Fatalf("Authenticate = %+v, %v; want %s by %v", got, err, tc.client, tc.method)
				}
				return
			}
			oe := oauth.As(err)
			if err == nil || oe.Code != tc.code || oe.Status != tc.status {
				t.Fatalf("Authenticate = %+v, %v; want %s (%d)", got, err, tc.code, tc.status)
			}
		})
	}
}

func mustOtherKey(t *testing.T, env *tokentest.Env) *tokentest.Client {
	t.Helper()
	return env.AddClient(t, "other-key-"+secrets.RandomToken(4), "p2", app, directoryv1.AuthMethod_AUTH_METHOD_PRIVATE_KEY_JWT)
}

// A regenerated secret works at once (the failed check reads the client
// again); a directory outage is temporarily_unavailable for a client never
// read, and a client read before keeps authenticating through it.
func TestAuthenticateThroughChangesAndOutages(t *testing.T) {
	t.Parallel()
	env := tokentest.New(t, db.SQLite, tokentest.Options{})
	c := env.AddClient(t, "web", "p1", app, directoryv1.AuthMethod_AUTH_METHOD_CLIENT_SECRET_POST)
	ctx := context.Background()
	cred := func(secret string) clients.Credentials {
		return clients.Credentials{ClientID: "web", ClientSecret: secret}
	}
	if _, err := env.Auth.Authenticate(ctx, cred(c.Secret), clients.SecretPost); err != nil {
		t.Fatal(err)
	}
	fresh := secrets.RandomToken(32)
	c.SecretHash = env.Hasher.Hash(fresh)
	env.Dir.PutClient(c.Client)
	if _, err := env.Auth.Authenticate(ctx, cred(fresh), clients.SecretPost); err != nil {
		t.Fatalf("regenerated secret: %v", err)
	}
	if _, err := env.Auth.Authenticate(ctx, cred(c.Secret), clients.SecretPost); oauth.As(err).Code != oauth.InvalidClient {
		t.Fatalf("the old secret after regeneration: %v; want invalid_client", err)
	}

	env.Dir.FailClients(connect.NewError(connect.CodeUnavailable, errors.New("directory down")))
	if _, err := env.Auth.Authenticate(ctx, cred("x"), clients.SecretPost); oauth.As(err).Code != oauth.InvalidClient {
		// The cached client answers: a wrong secret is still wrong.
		t.Fatalf("wrong secret during an outage: %v; want invalid_client", err)
	}
	if _, err := env.Auth.Authenticate(ctx, cred(fresh), clients.SecretPost); err != nil {
		t.Fatalf("known client during an outage: %v", err)
	}
	other := clients.Credentials{ClientID: "never-seen", ClientSecret: "x"}
	if _, err := env.Auth.Authenticate(ctx, other, clients.SecretPost); oauth.As(err).Code != oauth.TemporarilyUnavailable {
		t.Fatalf("unknown client during an outage: %v; want temporarily_unavailable", err)
	}
}
