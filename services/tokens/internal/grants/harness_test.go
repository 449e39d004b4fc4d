package grants_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/gatehouse-id/gatehouse/pkg/db"
	directoryv1 "github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/directory/v1"
	tokensv1 "github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/tokens/v1"
	"github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/tokens/v1/tokensv1connect"
	"github.com/gatehouse-id/gatehouse/pkg/testutil"
	"github.com/gatehouse-id/gatehouse/services/tokens/accesstoken"
	"github.com/gatehouse-id/gatehouse/services/tokens/internal/assertion"
	"github.com/gatehouse-id/gatehouse/services/tokens/internal/device"
	"github.com/gatehouse-id/gatehouse/services/tokens/internal/grants"
	"github.com/gatehouse-id/gatehouse/services/tokens/internal/introspection/tokentest"
	"github.com/gatehouse-id/gatehouse/services/tokens/internal/jwks"
	"github.com/gatehouse-id/gatehouse/services/tokens/internal/keys/keytest"
	"github.com/gatehouse-id/gatehouse/services/tokens/internal/lifecycle"
	"github.com/gatehouse-id/gatehouse/services/tokens/internal/revoke"
)

const (
	oidcApp       = directoryv1.ClientKind_CLIENT_KIND_OIDC_APP
	machine       = directoryv1.ClientKind_CLIENT_KIND_MACHINE_USER
	basic         = directoryv1.AuthMethod_AUTH_METHOD_CLIENT_SECRET_BASIC
	post          = directoryv1.AuthMethod_AUTH_METHOD_CLIENT_SECRET_POST
	none          = directoryv1.AuthMethod_AUTH_METHOD_NONE
	keyJWT        = directoryv1.AuthMethod_AUTH_METHOD_PRIVATE_KEY_JWT
	assertionType = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"

	redirectURI = "https://app.example.test/callback"
	aliceID     = "user-alice"
	// verifier is a valid PKCE code_verifier (43 unreserved characters).
	verifier = "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk"

	codeTTL     = time.Minute
	refreshIdle = time.Hour
	refreshAbs  = 3 * time.Hour
)

var _ grants.Directory = (*directory)(nil)
var _ lifecycle.Directory = (*directory)(nil)

// directory is a table-backed fake of the directory's internal API:
// clients and claims from tokentest's, plus users (GetUser) and machine
// keys (GetMachineKey).
type directory struct {
	*tokentest.Directory
	mu    sync.Mutex
	users map[string]*directoryv1.User
	keys  map[string]*directoryv1.GetMachineKeyResponse
	// usersErr, when set, is GetUser's answer; keysErr GetMachineKey's.
	usersErr, keysErr error
}

func (d *directory) failKeys(err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.keysErr = err
}

func (d *directory) failUsers(err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.usersErr = err
}

func (d *directory) putUser(u *directoryv1.User) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.users[u.GetId()] = u
}

func (d *directory) setState(id string, s directoryv1.UserState) {
	d.mu.Lock()
	defer d.mu.Unlock()
	u := proto.CloneOf(d.users[id]) // a fresh copy: earlier readers keep theirs
	u.State = s
	d.users[id] = u
}

func (d *directory) deleteUser(id string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.users, id)
	d.DeleteUser(id)
}

func (d *directory) GetUser(_ context.Context, req *directoryv1.GetUserRequest) (*directoryv1.GetUserResponse, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.usersErr != nil {
		return nil, d.usersErr
	}
	u, ok := d.users[req.GetUserId()]
	if !ok {
		return nil, connect.NewError(connect.CodeNotFound, errors.New("user not found"))
	}
	return &directoryv1.GetUserResponse{User: u}, nil
}

func (d *directory) GetMachineKey(_ context.Context, req *directoryv1.GetMachineKeyRequest) (*directoryv1.GetMachineKeyResponse, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.keysErr != nil {
		return nil, d.keysErr
	}
	k, ok := d.keys[req.GetKeyId()]
	if !ok {
		return nil, connect.NewError(connect.CodeNotFound, errors.New("key not found"))
	}
	return k, nil
}

// rpcAPI serves the lifecycle's procedures of the internal TokenService,
// as service/internal.go does.
type rpcAPI struct {
	tokensv1connect.UnimplementedTokenServiceHandler
	life *lifecycle.Lifecycle
}

func (a *rpcAPI) CreateAuthorizationCode(ctx context.Context, r *tokensv1.CreateAuthorizationCodeRequest) (*tokensv1.CreateAuthorizationCodeResponse, error) {
	return a.life.CreateAuthorizationCode(ctx, r)
}

func (a *rpcAPI) CreateImplicitTokens(ctx context.Context, r *tokensv1.CreateImplicitTokensRequest) (*tokensv1.CreateImplicitTokensResponse, error) {
	return a.life.CreateImplicitTokens(ctx, r)
}

func (a *rpcAPI) VerifyIDTokenHint(ctx context.Context, r *tokensv1.VerifyIDTokenHintRequest) (*tokensv1.VerifyIDTokenHintResponse, error) {
	return a.life.VerifyIDTokenHint(ctx, r)
}

func (a *rpcAPI) RevokeSession(ctx context.Context, r *tokensv1.RevokeSessionRequest) (*tokensv1.RevokeSessionResponse, error) {
	return a.life.RevokeSession(ctx, r)
}

func (a *rpcAPI) RevokeUserTokens(ctx context.Context, r *tokensv1.RevokeUserTokensRequest) (*tokensv1.RevokeUserTokensResponse, error) {
	return a.life.RevokeUserTokens(ctx, r)
}

func (a *rpcAPI) GetDeviceAuthorization(ctx context.Context, r *tokensv1.GetDeviceAuthorizationRequest) (*tokensv1.GetDeviceAuthorizationResponse, error) {
	return a.life.GetDeviceAuthorization(ctx, r)
}

func (a *rpcAPI) DecideDeviceAuthorization(ctx context.Context, r *tokensv1.DecideDeviceAuthorizationRequest) (*tokensv1.DecideDeviceAuthorizationResponse, error) {
	return a.life.DecideDeviceAuthorization(ctx, r)
}

// fixture is the token endpoint, the revocation endpoint, the key set and
// the internal TokenService over real HTTP, on the real token stack of a
// tokentest.Env, with registered clients.
type fixture struct {
	*tokentest.Env
	dir     *directory
	life    *lifecycle.Lifecycle
	base    string // plain HTTP: token, revoke, keys, internal API
	handler http.Handler
	rpc     tokensv1connect.TokenServiceClient

	// OIDC apps, one per authentication method; basic issues JWT access
	// tokens, the others opaque ones.
	basic, post, public, keyed *tokentest.Client
	// other is a second confidential app; noRefresh may not use the
	// refresh_token grant; robot is a machine user.
	other, noRefresh, robot *tokentest.Client
	// tv (public) and tvSecret (basic) use the device authorization grant.
	tv, tvSecret *tokentest.Client
}

type options struct {
	tokentest.Options
	grace time.Duration
}

func newFixture(t testing.TB, d db.Dialect, o options) *fixture {
	t.Helper()
	env := tokentest.New(t, d, o.Options)
	f := &fixture{Env: env, dir: &directory{Directory: env.Dir, users: map[string]*directoryv1.User{},
		keys: map[string]*directoryv1.GetMachineKeyResponse{}}}
	app := func(id string, m directoryv1.AuthMethod, jwt bool, grantTypes ...string) *tokentest.Client {
		c := env.AddClient(t, id, "proj-"+id, oidcApp, m)
		c.RedirectUris = []string{redirectURI, "https://app.example.test/other"}
		c.ResponseTypes = []string{"code", "id_token", "id_token token"}
		c.GrantTypes = grantTypes
		c.AccessTokenType = directoryv1.TokenType_TOKEN_TYPE_OPAQUE
		if jwt {
			c.AccessTokenType = directoryv1.TokenType_TOKEN_TYPE_JWT
		}
		return c
	}
	all := []string{"authorization_code", "refresh_token", "implicit"}
	f.basic = app("web-basic", basic, true, all...)
	f.post = app("web-post", post, false, all...)
	f.public = app("spa", none, false, all...)
	f.keyed = app("web-key", keyJWT, true, all...)
	f.other = app("other", basic, false, all...)
	f.noRefresh = app("no-refresh", basic, false, "authorization_code")
	f.robot = env.AddClient(t, "robot", "", machine, basic)
	f.tv = app("tv", none, true, lifecycle.GrantDeviceCode, "refresh_token")
	f.tvSecret = app("tv-secret", basic, false, lifecycle.GrantDeviceCode)

	env.Dir.PutUser(tokentest.Alice())
	f.dir.putUser(&directoryv1.User{Id: aliceID, OrgId: "org-1", UserName: "alice", State: directoryv1.UserState_USER_STATE_ACTIVE})

	f.life = &lifecycle.Lifecycle{Issuer: tokentest.Issuer, Store: env.Store, Minter: env.Minter, Hasher: env.Hasher,
		Revoked: env.Revoked, Keys: env.Keys, Dir: f.dir, Clients: env.Auth.Cache,
		CodeTTL: codeTTL, RefreshIdle: refreshIdle, RefreshAbs: refreshAbs, ReuseGrace: o.grace,
		Now: env.Clock.Now, Logger: tokentest.Quiet}
	assertions := &assertion.Verifier{Audiences: []string{tokentest.Issuer}, Replay: env.Store, Now: env.Clock.Now}
	rv, err := revoke.New(env.Auth, env.Validator, env.Revoked, f.life, tokentest.Quiet)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/oauth/v2/token", grants.New(grants.Deps{Auth: env.Auth, Minter: env.Minter, Dir: f.dir,
		Assertions: assertions, Lifecycle: f.life, Cuts: env.Revoked}, tokentest.Quiet))
	mux.Handle(revoke.Path, rv)
	mux.Handle(device.Path, &device.Endpoint{Issuer: tokentest.Issuer, Auth: env.Auth, Start: f.life, Logger: tokentest.Quiet})
	mux.Handle(jwks.Path, jwks.NewHandler(env.Keys, env.Keys.KeySetMaxAge(), tokentest.Quiet))
	mux.Handle(tokensv1connect.NewTokenServiceHandler(&rpcAPI{life: f.life}))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	f.base, f.handler = srv.URL, mux
	f.rpc = tokensv1connect.NewTokenServiceClient(srv.Client(), srv.URL)
	return f
}

func forDialects(t *testing.T, o options, fn func(t *testing.T, f *fixture)) {
	for _, d := range keytest.Dialects {
		t.Run(string(d), func(t *testing.T) { fn(t, newFixture(t, d, o)) })
	}
}

// advance moves the clock and reloads the signing keys (a replica that
// has not reloaded for PrePublish refuses to sign).
func (f *fixture) advance(t testing.TB, d time.Duration) {
	t.Helper()
	f.Clock.Advance(d)
	if err := f.Keys.Reload(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// login describes a completed authorization request.
type login struct {
	client    *tokentest.Client
	scopes    []string
	challenge string
	session   string
	redirect  string
	nonce     string
}

func (f *fixture) codeRequest(l login) *tokensv1.CreateAuthorizationCodeRequest {
	if l.scopes == nil {
		l.scopes = []string{"openid", "profile", "email", "offline_access"}
	}
	if l.session == "" {
		l.session = "session-1"
	}
	if l.redirect == "" {
		l.redirect = redirectURI
	}
	if l.nonce == "" {
		l.nonce = "nonce-1"
	}
	if l.client.GetAuthMethod() == none && l.challenge == "" {
		l.challenge = lifecycle.S256(verifier)
	}
	return &tokensv1.CreateAuthorizationCodeRequest{
		ClientId: l.client.GetClientId(), RedirectUri: l.redirect, UserId: aliceID, OrgId: "org-1",
		Scopes: l.scopes, Nonce: l.nonce, CodeChallenge: l.challenge, SessionId: l.session,
		AuthTime: timestamppb.New(f.Clock.Now().Add(-time.Minute)), Amr: []string{"pwd"},
	}
}

// code creates an authorization code through the internal API.
func (f *fixture) code(t testing.TB, l login) string {
	t.Helper()
	res, err := f.rpc.CreateAuthorizationCode(context.Background(), f.codeRequest(l))
	if err != nil {
		t.Fatalf("CreateAuthorizationCode: %v", err)
	}
	return res.GetCode()
}

// auth returns the form fields and request edit that authenticate c by
// its registered method.
func (f *fixture) auth(t testing.TB, c *tokentest.Client) (url.Values, func(*http.Request)) {
	t.Helper()
	switch c.GetAuthMethod() {
	case basic:
		return url.Values{}, tokentest.Basic(c.GetClientId(), c.Secret)
	case post:
		return url.Values{"client_id": {c.GetClientId()}, "client_secret": {c.Secret}}, nil
	case keyJWT:
		return url.Values{"client_assertion_type": {assertionType}, "client_assertion": {f.Assertion(t, c, "")}}, nil
	default:
		return url.Values{"client_id": {c.GetClientId()}}, nil
	}
}

// token posts a token request authenticated as c, with params.
func (f *fixture) token(t testing.TB, c *tokentest.Client, params url.Values) *tokentest.Response {
	t.Helper()
	form, edit := f.auth(t, c)
	for k, v := range params {
		form[k] = v
	}
	return tokentest.Call(t, http.MethodPost, f.base+"/oauth/v2/token", form, edit)
}

// exchange redeems code as c at redirectURI, with the PKCE verifier for a
// public client.
func (f *fixture) exchange(t testing.TB, c *tokentest.Client, code string) *tokentest.Response {
	t.Helper()
	p := url.Values{"grant_type": {"authorization_code"}, "code": {code}, "redirect_uri": {redirectURI}}
	if c.GetAuthMethod() == none {
		p.Set("code_verifier", verifier)
	}
	return f.token(t, c, p)
}

func (f *fixture) refresh(t testing.TB, c *tokentest.Client, rt string, extra url.Values) *tokentest.Response {
	t.Helper()
	p := url.Values{"grant_type": {"refresh_token"}, "refresh_token": {rt}}
	for k, v := range extra {
		p[k] = v
	}
	return f.token(t, c, p)
}

// tokens is a successful token response.
type tokens struct {
	AccessToken  string `json:"access_token"`
	TokenType    string `json:"token_type"`
	ExpiresIn    int64  `json:"expires_in"`
	Scope        string `json:"scope"`
	IDToken      string `json:"id_token"`
	RefreshToken string `json:"refresh_token"`
}

func wantTokens(t testing.TB, res *tokentest.Response) *tokens {
	t.Helper()
	if res.Status != http.StatusOK {
		t.Fatalf("status %d, body %s; want 200", res.Status, res.Body)
	}
	if cc := res.Header.Get("Cache-Control"); cc != "no-store" {
		t.Errorf("Cache-Control %q; want no-store", cc)
	}
	var tk tokens
	if err := json.Unmarshal(res.Body, &tk); err != nil {
		t.Fatal(err)
	}
	if tk.AccessToken == "" || tk.TokenType != "Bearer" || tk.ExpiresIn <= 0 {
		t.Fatalf("token response %s; want an access token, Bearer, expires_in", res.Body)
	}
	return &tk
}

func wantError(t testing.TB, res *tokentest.Response, status int, code string) {
	t.Helper()
	if res.Status != status || res.Error() != code {
		t.Fatalf("got %d %s; want %d %s", res.Status, res.Body, status, code)
	}
	if cc := res.Header.Get("Cache-Control"); cc != "no-store" {
		t.Errorf("Cache-Control %q; want no-store", cc)
	}
}

// active reports whether an access token validates (introspection's check).
func (f *fixture) active(t testing.TB, accessToken string) bool {
	t.Helper()
	_, err := f.Validator.Verify(context.Background(), accessToken)
	if errors.Is(err, accesstoken.ErrInactive) {
		return false
	}
	if err != nil {
		t.Fatal(err)
	}
	return true
}

// claims verifies a JWT of ours and returns its payload.
func (f *fixture) claims(t testing.TB, jwt string) map[string]any {
	t.Helper()
	payload, err := f.Keys.Verify(jwt)
	if err != nil {
		t.Fatalf("verify %q: %v", jwt, err)
	}
	var m map[string]any
	if err := json.Unmarshal(payload, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// postForm sends a form to the token endpoint from any goroutine (no t.Fatal).
func postForm(client *http.Client, target string, form url.Values, user, pass string) (int, []byte, error) {
	req, err := http.NewRequest(http.MethodPost, target, strings.NewReader(form.Encode()))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if user != "" {
		req.SetBasicAuth(url.QueryEscape(user), url.QueryEscape(pass))
	}
	res, err := client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	return res.StatusCode, b, err
}

// redisOptions puts the revocation list in the real Redis.
func redisOptions(t *testing.T) options {
	_, prefix := testutil.Redis(t)
	return options{Options: tokentest.Options{RedisURL: testutil.RedisURL(t), RedisPrefix: prefix}}
}
