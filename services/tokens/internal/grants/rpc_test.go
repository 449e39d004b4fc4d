package grants_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/coreos/go-oidc/v3/oidc"
	"google.golang.org/protobuf/proto"

	"github.com/gatehouse-id/gatehouse/pkg/db"
	tokensv1 "github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/tokens/v1"
	"github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/tokens/v1/tokensv1connect"
	"github.com/gatehouse-id/gatehouse/services/tokens/internal/introspection/tokentest"
	"github.com/gatehouse-id/gatehouse/services/tokens/internal/lifecycle"
	"github.com/gatehouse-id/gatehouse/services/tokens/internal/mint"
	"github.com/gatehouse-id/gatehouse/services/tokens/internal/store"
)

func wantCode(t testing.TB, err error, code connect.Code) {
	t.Helper()
	if connect.CodeOf(err) != code {
		t.Fatalf("error %v; want %v", err, code)
	}
}

// TestCreateAuthorizationCodeProtocols creates codes with the Connect,
// gRPC and gRPC-web clients; each code is exchangeable.
func TestCreateAuthorizationCodeProtocols(t *testing.T) {
	f := newFixture(t, "sqlite", options{})
	srv := httptest.NewUnstartedServer(f.handler)
	srv.EnableHTTP2 = true
	srv.StartTLS()
	t.Cleanup(srv.Close)
	for name, opt := range map[string]connect.ClientOption{
		"connect": connect.WithProtoJSON(), "grpc": connect.WithGRPC(), "grpc-web": connect.WithGRPCWeb(),
	} {
		t.Run(name, func(t *testing.T) {
			client := tokensv1connect.NewTokenServiceClient(srv.Client(), srv.URL, opt)
			res, err := client.CreateAuthorizationCode(context.Background(), f.codeRequest(login{client: f.basic}))
			if err != nil {
				t.Fatal(err)
			}
			wantTokens(t, f.exchange(t, f.basic, res.GetCode()))
			_, err = client.CreateAuthorizationCode(context.Background(), &tokensv1.CreateAuthorizationCodeRequest{ClientId: "nobody"})
			wantCode(t, err, connect.CodeNotFound)
		})
	}
}

// TestCreateAuthorizationCodeRefused covers the procedure's errors.
func TestCreateAuthorizationCodeRefused(t *testing.T) {
	f := newFixture(t, "sqlite", options{})
	inactive := f.AddClient(t, "inactive", "p", oidcApp, basic)
	inactive.Active = false
	inactive.GrantTypes = []string{"authorization_code"}
	edit := func(l login, fn func(*tokensv1.CreateAuthorizationCodeRequest)) *tokensv1.CreateAuthorizationCodeRequest {
		r := f.codeRequest(l)
		fn(r)
		return r
	}
	cases := []struct {
		name string
		req  *tokensv1.CreateAuthorizationCodeRequest
		code connect.Code
	}{
		{"no client_id", edit(login{client: f.basic}, func(r *tokensv1.CreateAuthorizationCodeRequest) { r.ClientId = "" }), connect.CodeInvalidArgument},
		{"unknown client", edit(login{client: f.basic}, func(r *tokensv1.CreateAuthorizationCodeRequest) { r.ClientId = "nobody" }), connect.CodeNotFound},
		{"inactive client", edit(login{client: inactive}, func(*tokensv1.CreateAuthorizationCodeRequest) {}), connect.CodeFailedPrecondition},
		{"machine user", edit(login{client: f.robot}, func(*tokensv1.CreateAuthorizationCodeRequest) {}), connect.CodeFailedPrecondition},
		{"unregistered redirect_uri", edit(login{client: f.basic, redirect: "https://evil.example/cb"}, func(*tokensv1.CreateAuthorizationCodeRequest) {}), connect.CodeFailedPrecondition},
		{"no openid", edit(login{client: f.basic, scopes: []string{"email"}}, func(*tokensv1.CreateAuthorizationCodeRequest) {}), connect.CodeInvalidArgument},
		{"unknown scope", edit(login{client: f.basic, scopes: []string{"openid", "nope"}}, func(*tokensv1.CreateAuthorizationCodeRequest) {}), connect.CodeInvalidArgument},
		{"no user", edit(login{client: f.basic}, func(r *tokensv1.CreateAuthorizationCodeRequest) { r.UserId = "" }), connect.CodeInvalidArgument},
		{"no auth_time", edit(login{client: f.basic}, func(r *tokensv1.CreateAuthorizationCodeRequest) { r.AuthTime = nil }), connect.CodeInvalidArgument},
		{"public client without challenge", edit(login{client: f.public}, func(r *tokensv1.CreateAuthorizationCodeRequest) { r.CodeChallenge = "" }), connect.CodeInvalidArgument},
		{"plain challenge", edit(login{client: f.public, challenge: verifier + "x"}, func(*tokensv1.CreateAuthorizationCodeRequest) {}), connect.CodeInvalidArgument},
		{"nonce too long", edit(login{client: f.basic, nonce: strings.Repeat("n", 1001)}, func(*tokensv1.CreateAuthorizationCodeRequest) {}), connect.CodeInvalidArgument},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := f.rpc.CreateAuthorizationCode(context.Background(), tc.req)
			wantCode(t, err, tc.code)
		})
	}
}

// TestNativeLoopbackCode: a native app's code may name its registered
// loopback redirect URI with any port (RFC 8252 §7.3); the token request
// must then send that URI exactly. Other apps get no such exception.
func TestNativeLoopbackCode(t *testing.T) {
	f := newFixture(t, "sqlite", options{})
	native := f.AddClient(t, "native-cli", "proj-cli", oidcApp, none)
	native.AppType = "native"
	native.RedirectUris = []string{"http://127.0.0.1/callback", "http://[::1]/callback"}
	native.ResponseTypes = []string{"code"}
	native.GrantTypes = []string{"authorization_code", "refresh_token"}
	for _, tc := range []struct{ uri, registered string }{
		{"http://127.0.0.1:53121/callback", "http://127.0.0.1/callback"},
		{"http://[::1]:8/callback", "http://[::1]/callback"},
		{"http://127.0.0.1/callback", ""},
	} {
		code := f.code(t, login{client: native, redirect: tc.uri})
		exchange := func(redirect string) *tokentest.Response {
			return f.token(t, native, url.Values{"grant_type": {"authorization_code"}, "code": {code},
				"redirect_uri": {redirect}, "code_verifier": {verifier}})
		}
		if tc.registered != "" {
			// The registered form is not the request's: refused, and the
			// code stays unused.
			wantError(t, exchange(tc.registered), 400, "invalid_grant")
			wantError(t, exchange("http://127.0.0.1:1/callback"), 400, "invalid_grant")
		}
		wantTokens(t, exchange(tc.uri))
	}
	for _, tc := range []struct {
		name   string
		client *tokentest.Client
		uri    string
	}{
		{"native, localhost", native, "http://localhost:53121/callback"},
		{"native, other path", native, "http://127.0.0.1:53121/other"},
		{"native, userinfo", native, "http://u@127.0.0.1:53121/callback"},
	} {
		_, err := f.rpc.CreateAuthorizationCode(context.Background(), f.codeRequest(login{client: tc.client, redirect: tc.uri}))
		if connect.CodeOf(err) != connect.CodeFailedPrecondition {
			t.Errorf("%s: %v; want FailedPrecondition", tc.name, err)
		}
	}
	web := f.AddClient(t, "web-loopback", "proj-web", oidcApp, none)
	web.AppType = "web"
	web.RedirectUris = []string{"http://127.0.0.1/callback"}
	web.GrantTypes = []string{"authorization_code"}
	_, err := f.rpc.CreateAuthorizationCode(context.Background(), f.codeRequest(login{client: web, redirect: "http://127.0.0.1:53121/callback"}))
	wantCode(t, err, connect.CodeFailedPrecondition)
}

func (f *fixture) implicitRequest(c *tokentest.Client, responseType, session string) *tokensv1.CreateImplicitTokensRequest {
	r := f.codeRequest(login{client: c, session: session, scopes: []string{"openid", "email", "offline_access"}})
	return &tokensv1.CreateImplicitTokensRequest{ClientId: r.ClientId, UserId: r.UserId, OrgId: r.OrgId, Scopes: r.Scopes,
		Nonce: r.Nonce, SessionId: r.SessionId, AuthTime: r.AuthTime, Amr: r.Amr, ResponseType: responseType}
}

// TestImplicitTokens: "id_token token" returns an access token and an ID
// token with at_hash and no userinfo claims; "id_token" alone carries the
// claims (OIDC Core 5.4). Verified with go-oidc.
func TestImplicitTokens(t *testing.T) {
	forDialects(t, options{}, func(t *testing.T, f *fixture) {
		ctx := context.Background()
		v := oidc.NewVerifier(tokentest.Issuer, oidc.NewRemoteKeySet(ctx, f.base+"/oauth/v2/keys"),
			&oidc.Config{ClientID: f.post.GetClientId(), Now: f.Clock.Now})

		res, err := f.rpc.CreateImplicitTokens(ctx, f.implicitRequest(f.post, "id_token token", "s"))
		if err != nil {
			t.Fatal(err)
		}
		m := res
		if m.GetAccessToken() == "" || m.GetTokenType() != "Bearer" || m.GetExpiresIn() != 900 || m.GetScope() != "openid email" {
			t.Fatalf("response %v; want an access token, Bearer, 900 s, scope without offline_access", m)
		}
		if !f.active(t, m.GetAccessToken()) {
			t.Error("implicit access token not active")
		}
		idt, err := v.Verify(ctx, m.GetIdToken())
		if err != nil {
			t.Fatal(err)
		}
		if err := idt.VerifyAccessToken(m.GetAccessToken()); err != nil {
			t.Errorf("at_hash: %v", err)
		}
		var c struct {
			Email string `json:"email"`
			SID   string `json:"sid"`
		}
		if err := idt.Claims(&c); err != nil || c.Email != "" || c.SID != "s" || idt.Nonce != "nonce-1" {
			t.Errorf("claims %+v nonce %q (%v); want no email, sid s, nonce-1", c, idt.Nonce, err)
		}

		res, err = f.rpc.CreateImplicitTokens(ctx, f.implicitRequest(f.post, "id_token", "s"))
		if err != nil {
			t.Fatal(err)
		}
		if res.GetAccessToken() != "" || res.GetExpiresIn() != 0 {
			t.Errorf("id_token response %v; want no access token", res)
		}
		if idt, err = v.Verify(ctx, res.GetIdToken()); err != nil {
			t.Fatal(err)
		}
		if err := idt.Claims(&c); err != nil || c.Email != "alice@example.test" {
			t.Errorf("id_token alone: email %q (%v); want the user's", c.Email, err)
		}
	})
}

// TestImplicitTokensRefused covers the procedure's errors.
func TestImplicitTokensRefused(t *testing.T) {
	f := newFixture(t, "sqlite", options{})
	f.noRefresh.ResponseTypes = []string{"code"}
	codeOnly := f.AddClient(t, "code-only", "p", oidcApp, basic)
	codeOnly.GrantTypes = []string{"authorization_code", "implicit"}
	codeOnly.ResponseTypes = []string{"code"}
	mod := func(fn func(*tokensv1.CreateImplicitTokensRequest)) *tokensv1.CreateImplicitTokensRequest {
		r := f.implicitRequest(f.post, "id_token token", "s")
		fn(r)
		return r
	}
	cases := []struct {
		name string
		req  *tokensv1.CreateImplicitTokensRequest
		code connect.Code
	}{
		{"code response type", mod(func(r *tokensv1.CreateImplicitTokensRequest) { r.ResponseType = "code" }), connect.CodeInvalidArgument},
		{"no nonce", mod(func(r *tokensv1.CreateImplicitTokensRequest) { r.Nonce = "" }), connect.CodeInvalidArgument},
		{"no openid", mod(func(r *tokensv1.CreateImplicitTokensRequest) { r.Scopes = []string{"email"} }), connect.CodeInvalidArgument},
		{"unknown client", mod(func(r *tokensv1.CreateImplicitTokensRequest) { r.ClientId = "nobody" }), connect.CodeNotFound},
		{"no implicit grant", mod(func(r *tokensv1.CreateImplicitTokensRequest) { r.ClientId = f.noRefresh.GetClientId() }), connect.CodeFailedPrecondition},
		{"response type not allowed", mod(func(r *tokensv1.CreateImplicitTokensRequest) { r.ClientId = codeOnly.GetClientId() }), connect.CodeFailedPrecondition},
		{"unknown user (claims)", mod(func(r *tokensv1.CreateImplicitTokensRequest) {
			r.UserId = "ghost"
			r.ResponseType = "id_token"
		}), connect.CodeNotFound},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := f.rpc.CreateImplicitTokens(context.Background(), tc.req)
			wantCode(t, err, tc.code)
		})
	}
}

// TestVerifyIDTokenHint accepts our ID tokens (expired ones only when
// asked) and refuses anything else.
func TestVerifyIDTokenHint(t *testing.T) {
	forDialects(t, options{}, func(t *testing.T, f *fixture) {
		ctx := context.Background()
		tk := f.start(t, f.basic, "sess-9") // JWT access token
		verify := func(token string, allowExpired bool) (*tokensv1.VerifyIDTokenHintResponse, error) {
			res, err := f.rpc.VerifyIDTokenHint(ctx, &tokensv1.VerifyIDTokenHintRequest{IdToken: token, AllowExpired: allowExpired})
			if err != nil {
				return nil, err
			}
			return res, nil
		}
		got, err := verify(tk.IDToken, false)
		if err != nil {
			t.Fatal(err)
		}
		want := &tokensv1.VerifyIDTokenHintResponse{Subject: aliceID, ClientId: f.basic.GetClientId(), SessionId: "sess-9"}
		if got.GetSubject() != want.Subject || got.GetClientId() != want.ClientId || got.GetSessionId() != want.SessionId ||
			!got.GetAuthTime().AsTime().Equal(f.Clock.Now().Add(-time.Minute).Truncate(time.Second)) ||
			!got.GetExpiresAt().AsTime().Equal(f.Clock.Now().Add(15*time.Minute).Truncate(time.Second)) {
			t.Errorf("got %v; want %v with auth_time and exp", got, want)
		}
		for name, bad := range map[string]string{
			"access token": tk.AccessToken, "garbage": "a.b.c", "empty": "",
			"tampered": tk.IDToken[:len(tk.IDToken)-4] + "AAAA", "foreign key": foreignJWT(t),
		} {
			if _, err := verify(bad, true); connect.CodeOf(err) != connect.CodeInvalidArgument {
				t.Errorf("%s: %v; want InvalidArgument", name, err)
			}
		}
		f.advance(t, 16*time.Minute)
		_, err = verify(tk.IDToken, false)
		wantCode(t, err, connect.CodeInvalidArgument)
		if got, err := verify(tk.IDToken, true); err != nil || got.GetSubject() != aliceID {
			t.Errorf("expired hint with allow_expired: %v %v; want accepted", got, err)
		}
	})
}

// foreignJWT is an ID token with our issuer signed by a key that is not ours.
func foreignJWT(t *testing.T) string {
	other := tokentest.New(t, "sqlite", tokentest.Options{})
	tok, err := other.Minter.IDToken(mint.ID{Subject: aliceID, ClientID: "web-basic"})
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// TestRevokeSession: logout revokes every access and refresh token of the
// session — from code exchanges, refreshes and the implicit flow — and
// voids its unused codes; other sessions keep theirs.
func TestRevokeSession(t *testing.T) {
	run := func(t *testing.T, f *fixture) {
		ctx := context.Background()
		a := f.start(t, f.basic, "s1")
		aNext := wantTokens(t, f.refresh(t, f.basic, a.RefreshToken, nil))
		b := f.start(t, f.post, "s1")
		imp, err := f.rpc.CreateImplicitTokens(ctx, f.implicitRequest(f.post, "id_token token", "s1"))
		if err != nil {
			t.Fatal(err)
		}
		unused := f.code(t, login{client: f.basic, session: "s1"})
		keep := f.start(t, f.basic, "s2")

		if _, err := f.rpc.RevokeSession(ctx, &tokensv1.RevokeSessionRequest{SessionId: "s1"}); err != nil {
			t.Fatal(err)
		}
		for name, at := range map[string]string{"code": a.AccessToken, "refreshed": aNext.AccessToken,
			"second client": b.AccessToken, "implicit": imp.GetAccessToken()} {
			if f.active(t, at) {
				t.Errorf("%s access token still active after logout", name)
			}
		}
		wantError(t, f.refresh(t, f.basic, aNext.RefreshToken, nil), 400, "invalid_grant")
		wantError(t, f.refresh(t, f.post, b.RefreshToken, nil), 400, "invalid_grant")
		wantError(t, f.exchange(t, f.basic, unused), 400, "invalid_grant")
		if !f.active(t, keep.AccessToken) {
			t.Error("another session's access token was revoked")
		}
		wantTokens(t, f.refresh(t, f.basic, keep.RefreshToken, nil))

		// Idempotent; unknown sessions are fine; an empty id is refused.
		if _, err := f.rpc.RevokeSession(ctx, &tokensv1.RevokeSessionRequest{SessionId: "s1"}); err != nil {
			t.Error(err)
		}
		if _, err := f.rpc.RevokeSession(ctx, &tokensv1.RevokeSessionRequest{SessionId: "nope"}); err != nil {
			t.Error(err)
		}
		_, err = f.rpc.RevokeSession(ctx, &tokensv1.RevokeSessionRequest{})
		wantCode(t, err, connect.CodeInvalidArgument)
	}
	forDialects(t, options{}, run)
	t.Run("redis", func(t *testing.T) { run(t, newFixture(t, "sqlite", redisOptions(t))) })
}

// TestRevokeSessionUnavailable: when the revocation list cannot record the
// revocation the call fails (Unavailable), so authn can retry.
func TestRevokeSessionUnavailable(t *testing.T) {
	f := newFixture(t, "sqlite", options{})
	tk := f.start(t, f.basic, "s1")
	f.life.Revoked = failing{}
	_, err := f.rpc.RevokeSession(context.Background(), &tokensv1.RevokeSessionRequest{SessionId: "s1"})
	wantCode(t, err, connect.CodeUnavailable)
	if strings.Contains(err.Error(), "boom") {
		t.Errorf("error %q leaks the cause", err)
	}
	f.life.Revoked = f.Revoked
	if _, err := f.rpc.RevokeSession(context.Background(), &tokensv1.RevokeSessionRequest{SessionId: "s1"}); err != nil {
		t.Fatal(err)
	}
	if f.active(t, tk.AccessToken) {
		t.Error("access token active after the retried logout")
	}
}

type failing struct{}

func (failing) RevokeMany(context.Context, []string, []time.Time) error { return errors.New("boom") }

func (failing) TokenRevoked(context.Context, string, string, time.Time) (bool, error) {
	return false, errors.New("boom")
}

var _ lifecycle.Revocations = failing{}

// TestRefreshAfterClientDeactivated: a deactivated client cannot refresh.
func TestRefreshAfterClientDeactivated(t *testing.T) {
	f := newFixture(t, "sqlite", options{})
	tk := f.start(t, f.basic, "s")
	c := proto.CloneOf(f.basic.Client)
	c.Active = false
	f.dir.PutClient(c)
	if _, err := f.Auth.Cache.Refresh(context.Background(), c.GetClientId()); err != nil {
		t.Fatal(err)
	}
	res := tokentest.Call(t, http.MethodPost, f.base+"/oauth/v2/token", url.Values{"grant_type": {"refresh_token"},
		"refresh_token": {tk.RefreshToken}}, tokentest.Basic(f.basic.GetClientId(), f.basic.Secret))
	wantError(t, res, 401, "invalid_client")
}

// TestRevokeSessionDuringRefreshes: logout while the session's refresh
// token chains rotate concurrently leaves no token of the session alive —
// a rotation committed during the logout is caught too.
func TestRevokeSessionDuringRefreshes(t *testing.T) {
	forDialects(t, options{}, func(t *testing.T, f *fixture) {
		const chains = 4
		type chain struct {
			last *tokens
			err  error
		}
		results := make([]chain, chains)
		started := make(chan struct{}, chains)
		var wg sync.WaitGroup
		for i := range chains {
			results[i].last = f.start(t, f.post, "s1")
			wg.Add(1)
			go func() {
				defer wg.Done()
				r := &results[i]
				for n := 0; n < 200; n++ {
					status, body, err := postForm(http.DefaultClient, f.base+"/oauth/v2/token", url.Values{
						"grant_type": {"refresh_token"}, "refresh_token": {r.last.RefreshToken},
						"client_id": {f.post.GetClientId()}, "client_secret": {f.post.Secret}}, "", "")
					if err != nil {
						r.err = err
						return
					}
					if status != http.StatusOK {
						return // revoked: the chain ends
					}
					var tk tokens
					if r.err = json.Unmarshal(body, &tk); r.err != nil {
						return
					}
					r.last = &tk
					if n == 1 {
						started <- struct{}{}
					}
				}
			}()
		}
		for range chains {
			<-started
		}
		if _, err := f.rpc.RevokeSession(context.Background(), &tokensv1.RevokeSessionRequest{SessionId: "s1"}); err != nil {
			t.Fatal(err)
		}
		wg.Wait()
		for i, r := range results {
			if r.err != nil {
				t.Fatal(r.err)
			}
			if f.active(t, r.last.AccessToken) {
				t.Errorf("chain %d: the last access token is active after logout", i)
			}
			wantError(t, f.refresh(t, f.post, r.last.RefreshToken, nil), 400, "invalid_grant")
		}
	})
}

// TestPrune deletes expired codes (after an access token lifetime) and
// expired refresh tokens, and keeps the rest.
func TestPrune(t *testing.T) {
	forDialects(t, options{}, func(t *testing.T, f *fixture) {
		ctx := context.Background()
		count := func(table string) int {
			var n int
			if err := f.DB.Get(ctx, &n, "SELECT COUNT(*) FROM "+table); err != nil {
				t.Fatal(err)
			}
			return n
		}
		f.start(t, f.basic, "s")          // one used code, one refresh token
		f.code(t, login{client: f.basic}) // one unused code
		f.advance(t, codeTTL+10*time.Minute)
		if _, err := (&db.Pruner{DB: f.Store.DB, Service: "tokens", Steps: store.PruneSteps(f.life.CodeGrace())}).RunOnce(ctx, f.Clock.Now()); err != nil {
			t.Fatal(err)
		}
		if count("auth_codes") != 2 || count("refresh_tokens") != 1 {
			t.Fatalf("codes %d refresh %d; want both kept", count("auth_codes"), count("refresh_tokens"))
		}
		f.advance(t, refreshIdle)
		if _, err := (&db.Pruner{DB: f.Store.DB, Service: "tokens", Steps: store.PruneSteps(f.life.CodeGrace())}).RunOnce(ctx, f.Clock.Now()); err != nil {
			t.Fatal(err)
		}
		if count("auth_codes") != 0 || count("refresh_tokens") != 0 {
			t.Fatalf("codes %d refresh %d; want none", count("auth_codes"), count("refresh_tokens"))
		}
	})
}
