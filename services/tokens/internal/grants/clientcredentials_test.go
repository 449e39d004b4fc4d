package grants_test

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	directoryv1 "github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/directory/v1"
	"github.com/gatehouse-id/gatehouse/services/tokens/internal/introspection/tokentest"
	"github.com/gatehouse-id/gatehouse/services/tokens/internal/revocation"
)

// clientCredentials posts a client_credentials request for c with its
// secret, by Basic (post false) or in the body, asking for scope.
func (f *fixture) clientCredentials(t testing.TB, c *tokentest.Client, secret string, post bool, scope string) *tokentest.Response {
	t.Helper()
	form := url.Values{"grant_type": {"client_credentials"}}
	if scope != "" {
		form.Set("scope", scope)
	}
	var edit func(*http.Request)
	if post {
		form.Set("client_id", c.GetClientId())
		form.Set("client_secret", secret)
	} else {
		edit = tokentest.Basic(c.GetClientId(), secret)
	}
	return tokentest.Call(t, http.MethodPost, f.base+"/oauth/v2/token", form, edit)
}

// update replaces the directory's record of c with a changed copy
// (earlier readers, the client cache among them, keep theirs).
func (f *fixture) update(c *tokentest.Client, change func(*directoryv1.Client)) {
	cl := proto.CloneOf(c.Client)
	change(cl)
	c.Client = cl
	f.Dir.PutClient(cl)
}

// TestClientCredentials: a machine user with a secret gets an access token
// by client_secret_basic and by client_secret_post — opaque or a JWT as
// it is registered — and nothing else: no refresh token, no ID token,
// offline_access dropped from the granted scopes. The token names the
// machine user as subject and client and is active.
func TestClientCredentials(t *testing.T) {
	forDialects(t, options{}, func(t *testing.T, f *fixture) {
		for _, jwt := range []bool{false, true} {
			for _, post := range []bool{false, true} {
				name := map[bool]string{false: "basic", true: "post"}[post] + map[bool]string{false: "/opaque", true: "/jwt"}[jwt]
				t.Run(name, func(t *testing.T) {
					f.update(f.robot, func(c *directoryv1.Client) {
						c.AccessTokenType = map[bool]directoryv1.TokenType{false: directoryv1.TokenType_TOKEN_TYPE_OPAQUE, true: directoryv1.TokenType_TOKEN_TYPE_JWT}[jwt]
					})
					_, _ = f.Auth.Cache.Refresh(context.Background(), f.robot.GetClientId())
					tk := wantTokens(t, f.clientCredentials(t, f.robot, f.robot.Secret, post, "openid profile offline_access"))
					if tk.RefreshToken != "" || tk.IDToken != "" {
						t.Fatalf("response %+v; want an access token only", tk)
					}
					if tk.Scope != "openid profile" {
						t.Errorf("scope %q; want offline_access dropped", tk.Scope)
					}
					if isJWT := strings.Count(tk.AccessToken, ".") == 2; isJWT != jwt {
						t.Errorf("access token %q: JWT %v; want %v", tk.AccessToken, isJWT, jwt)
					}
					tok, err := f.Validator.Verify(context.Background(), tk.AccessToken)
					if err != nil {
						t.Fatalf("the access token is not active: %v", err)
					}
					if tok.Subject != f.robot.GetId() || tok.ClientID != f.robot.GetClientId() || !slices.Equal(tok.Audience, []string{f.robot.GetClientId()}) {
						t.Errorf("token sub %q client_id %q aud %v; want %q, %q, [%[2]q]", tok.Subject, tok.ClientID, tok.Audience, f.robot.GetId(), f.robot.GetClientId())
					}
					if jwt {
						c := f.claims(t, tk.AccessToken)
						if c["sub"] != f.robot.GetId() || c["client_id"] != f.robot.GetClientId() || c["scope"] != "openid profile" {
							t.Errorf("JWT claims %v", c)
						}
					}
				})
			}
		}
	})
}

// TestClientCredentialsRefused: every way the grant is refused, with the
// error RFC 6749 §5.2 and the seed name for it.
func TestClientCredentialsRefused(t *testing.T) {
	f := newFixture(t, "sqlite", options{})
	inactive := f.Env.AddClient(t, "robot-inactive", "", machine, basic)
	f.update(inactive, func(c *directoryv1.Client) { c.Active = false })
	postRobot := f.Env.AddClient(t, "robot-post", "", machine, post)
	cases := []struct {
		name   string
		res    func() *tokentest.Response
		status int
		code   string
	}{
		{"wrong secret (Basic)", func() *tokentest.Response { return f.clientCredentials(t, f.robot, "wrong", false, "") }, 401, "invalid_client"},
		{"wrong secret (post)", func() *tokentest.Response { return f.clientCredentials(t, f.robot, "wrong", true, "") }, 400, "invalid_client"},
		{"no secret", func() *tokentest.Response {
			return tokentest.Call(t, http.MethodPost, f.base+"/oauth/v2/token", url.Values{"grant_type": {"client_credentials"}, "client_id": {"robot"}}, nil)
		}, 400, "invalid_client"},
		{"unknown client", func() *tokentest.Response {
			return f.clientCredentials(t, &tokentest.Client{Client: &directoryv1.Client{ClientId: "nobody"}}, "x", false, "")
		}, 401, "invalid_client"},
		{"inactive machine user", func() *tokentest.Response { return f.clientCredentials(t, inactive, inactive.Secret, false, "") }, 401, "invalid_client"},
		{"an OIDC app", func() *tokentest.Response { return f.clientCredentials(t, f.basic, f.basic.Secret, false, "") }, 400, "unauthorized_client"},
		{"private_key_jwt", func() *tokentest.Response {
			return tokentest.Call(t, http.MethodPost, f.base+"/oauth/v2/token", url.Values{"grant_type": {"client_credentials"},
				"client_assertion_type": {assertionType}, "client_assertion": {f.Assertion(t, f.keyed, "")}}, nil)
		}, 400, "invalid_client"},
		{"unknown scope", func() *tokentest.Response {
			return f.clientCredentials(t, f.robot, f.robot.Secret, false, "openid admin")
		}, 400, "invalid_scope"},
		{"project of another organization", func() *tokentest.Response {
			return f.clientCredentials(t, f.robot, f.robot.Secret, false, "urn:gatehouse:iam:org:project:id:elsewhere:aud")
		}, 400, "invalid_scope"},
		{"another organization", func() *tokentest.Response {
			return f.clientCredentials(t, f.robot, f.robot.Secret, false, "urn:gatehouse:iam:org:id:org-2")
		}, 400, "invalid_scope"},
		{"repeated scope parameter", func() *tokentest.Response {
			return tokentest.Call(t, http.MethodPost, f.base+"/oauth/v2/token", url.Values{"grant_type": {"client_credentials"}, "scope": {"openid", "email"}},
				tokentest.Basic(f.robot.GetClientId(), f.robot.Secret))
		}, 400, "invalid_request"},
		{"Basic and post at once", func() *tokentest.Response {
			return tokentest.Call(t, http.MethodPost, f.base+"/oauth/v2/token", url.Values{"grant_type": {"client_credentials"},
				"client_id": {"robot"}, "client_secret": {f.robot.Secret}}, tokentest.Basic(f.robot.GetClientId(), f.robot.Secret))
		}, 400, "invalid_request"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res := tc.res()
			wantError(t, res, tc.status, tc.code)
			if want := tc.status == 401; (res.Header.Get("WWW-Authenticate") != "") != want {
				t.Errorf("WWW-Authenticate %q; want one only with 401", res.Header.Get("WWW-Authenticate"))
			}
		})
	}
	// A machine user registered for client_secret_post may use Basic too.
	wantTokens(t, f.clientCredentials(t, postRobot, postRobot.Secret, false, ""))
}

// TestClientCredentialsScopes: a machine user may ask for the management
// audience, its own organization and projects of its organization; each
// project lands in aud.
func TestClientCredentialsScopes(t *testing.T) {
	f := newFixture(t, "sqlite", options{})
	f.update(f.robot, func(c *directoryv1.Client) { c.OrgProjectIds = []string{"proj-1"} })
	scope := "openid urn:gatehouse:iam:org:project:id:gatehouse:aud urn:gatehouse:iam:org:project:id:proj-1:aud urn:gatehouse:iam:org:id:org-1"
	tk := wantTokens(t, f.clientCredentials(t, f.robot, f.robot.Secret, false, scope))
	if tk.Scope != scope {
		t.Errorf("scope %q; want %q", tk.Scope, scope)
	}
	tok, err := f.Validator.Verify(context.Background(), tk.AccessToken)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"robot", "gatehouse", "proj-1"}; !slices.Equal(tok.Audience, want) {
		t.Errorf("aud %v; want %v", tok.Audience, want)
	}
}

// TestClientCredentialsCutOff: the client cache may still hold a machine
// user the directory has deactivated. Once the user has a cut-off on the
// revocation list (deactivation writes one), client_credentials reads the
// user fresh: deactivated means invalid_client at once; still active (a
// password reset's cut-off) means a token issued after the cut, which
// stays active; a directory outage then is temporarily_unavailable.
func TestClientCredentialsCutOff(t *testing.T) {
	forDialects(t, options{}, func(t *testing.T, f *fixture) {
		ctx := context.Background()
		before := wantTokens(t, f.clientCredentials(t, f.robot, f.robot.Secret, false, "")) // cached from here on
		cut := func() {
			t.Helper()
			if err := f.Revoked.Revoke(ctx, revocation.UserKey(f.robot.GetId()), revocation.UserUntil(f.Clock.Now(), f.Minter.AccessTTL)); err != nil {
				t.Fatal(err)
			}
			f.advance(t, time.Second)
		}

		// Still active: a new token, issued after the cut, active; the
		// one from before is not.
		cut()
		after := wantTokens(t, f.clientCredentials(t, f.robot, f.robot.Secret, false, ""))
		if !f.active(t, after.AccessToken) {
			t.Error("a token issued after the cut-off is not active")
		}
		if f.active(t, before.AccessToken) {
			t.Error("a token issued before the cut-off is still active")
		}

		// The directory is down: no token on a cached record.
		f.Dir.FailClients(connect.NewError(connect.CodeUnavailable, errors.New("directory down")))
		res := f.clientCredentials(t, f.robot, f.robot.Secret, false, "")
		wantError(t, res, 503, "temporarily_unavailable")
		if res.Header.Get("Retry-After") == "" {
			t.Error("503 without Retry-After")
		}
		f.Dir.FailClients(nil)

		// Deactivated in the directory while cached as active.
		f.update(f.robot, func(c *directoryv1.Client) { c.Active = false })
		cut()
		wantError(t, f.clientCredentials(t, f.robot, f.robot.Secret, false, ""), 401, "invalid_client")
	})
}
