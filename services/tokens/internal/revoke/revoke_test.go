package revoke_test

import (
	"context"
	"errors"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	directoryv1 "github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/directory/v1"
	"github.com/gatehouse-id/gatehouse/pkg/testutil"
	"github.com/gatehouse-id/gatehouse/services/tokens/accesstoken"
	"github.com/gatehouse-id/gatehouse/services/tokens/internal/clients"
	"github.com/gatehouse-id/gatehouse/services/tokens/internal/introspection/tokentest"
	"github.com/gatehouse-id/gatehouse/services/tokens/internal/keys/keytest"
	"github.com/gatehouse-id/gatehouse/services/tokens/internal/mint"
	"github.com/gatehouse-id/gatehouse/services/tokens/internal/revocation"
	"github.com/gatehouse-id/gatehouse/services/tokens/internal/revoke"
)

const (
	oidcApp       = directoryv1.ClientKind_CLIENT_KIND_OIDC_APP
	basic         = directoryv1.AuthMethod_AUTH_METHOD_CLIENT_SECRET_BASIC
	post          = directoryv1.AuthMethod_AUTH_METHOD_CLIENT_SECRET_POST
	none          = directoryv1.AuthMethod_AUTH_METHOD_NONE
	keyJWT        = directoryv1.AuthMethod_AUTH_METHOD_PRIVATE_KEY_JWT
	assertionType = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
)

// refreshTokens is a table-backed RefreshRevoker: raw token -> owner.
type refreshTokens struct {
	mu      sync.Mutex
	owner   map[string]string
	revoked map[string]bool
	calls   []string // "raw/clientID" per call
	err     error
}

func newRefreshTokens() *refreshTokens {
	return &refreshTokens{owner: map[string]string{}, revoked: map[string]bool{}}
}

func (r *refreshTokens) RevokeRefreshToken(_ context.Context, raw, clientID string) (bool, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, raw+"/"+clientID)
	if r.err != nil {
		return false, r.err
	}
	if r.owner[raw] != clientID {
		return false, nil
	}
	r.revoked[raw] = true
	return true, nil
}

func (r *refreshTokens) add(raw, clientID string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.owner[raw] = clientID
}

func (r *refreshTokens) fail(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.err = err
}

func (r *refreshTokens) state() (calls []string, revoked map[string]bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.calls...), maps.Clone(r.revoked)
}

var (
	_ revoke.RefreshRevoker      = (*refreshTokens)(nil)
	_ revoke.ClientAuthenticator = (*clients.Authenticator)(nil)
	_ revoke.AccessTokens        = (*accesstoken.Verifier)(nil)
	_ revoke.Revocations         = (*revocation.List)(nil)
)

// failingList fails every revocation while fail is set.
type failingList struct {
	*revocation.List
	fail atomic.Bool
}

func (f *failingList) Revoke(ctx context.Context, id string, exp time.Time) error {
	if f.fail.Load() {
		return errors.New("database unavailable")
	}
	return f.List.Revoke(ctx, id, exp)
}

type fixture struct {
	env                              *tokentest.Env
	url                              string
	refresh                          *refreshTokens
	list                             *failingList
	web, webPost, native, keyApp, ot *tokentest.Client
}

func newFixture(t *testing.T, env *tokentest.Env) *fixture {
	f := &fixture{env: env, refresh: newRefreshTokens(), list: &failingList{List: env.Revoked}}
	f.web = env.AddClient(t, "web", "proj", oidcApp, basic)
	f.webPost = env.AddClient(t, "web-post", "proj", oidcApp, post)
	f.native = env.AddClient(t, "native", "proj", oidcApp, none)
	f.keyApp = env.AddClient(t, "key-app", "proj", oidcApp, keyJWT)
	f.ot = env.AddClient(t, "other", "proj-other", oidcApp, basic)
	h, err := revoke.New(env.Auth, env.Validator, f.list, f.refresh, tokentest.Quiet)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	f.url = srv.URL + revoke.Path
	return f
}

// auth returns the form fields and request edit with which c
// authenticates by its registered method.
func (f *fixture) auth(t *testing.T, c *tokentest.Client) (url.Values, func(*http.Request)) {
	switch c.GetAuthMethod() {
	case basic:
		return url.Values{}, tokentest.Basic(c.GetClientId(), c.Secret)
	case post:
		return url.Values{"client_id": {c.GetClientId()}, "client_secret": {c.Secret}}, nil
	case keyJWT:
		return url.Values{"client_assertion_type": {assertionType}, "client_assertion": {f.env.Assertion(t, c, "")}}, nil
	}
	return url.Values{"client_id": {c.GetClientId()}}, nil
}

// revoke posts token (and extra fields) as client c.
func (f *fixture) revoke(t *testing.T, c *tokentest.Client, token string, extra url.Values) *tokentest.Response {
	t.Helper()
	form, edit := f.auth(t, c)
	form.Set("token", token)
	maps.Copy(form, extra)
	return tokentest.Call(t, http.MethodPost, f.url, form, edit)
}

func wantOK(t *testing.T, res *tokentest.Response) {
	t.Helper()
	if res.Status != http.StatusOK || len(res.Body) != 0 || res.Header.Get("Cache-Control") != "no-store" {
		t.Fatalf("got %d %v %q; want 200, empty body, Cache-Control no-store", res.Status, res.Header, res.Body)
	}
}

func wantError(t *testing.T, res *tokentest.Response, status int, code string) {
	t.Helper()
	if res.Status != status || res.Error() != code || res.Header.Get("Cache-Control") != "no-store" {
		t.Fatalf("got %d %s; want %d %s with no-store", res.Status, res.Body, status, code)
	}
}

// active reports whether the access token still validates.
func (f *fixture) active(t *testing.T, at *mint.Issued) bool {
	t.Helper()
	_, err := f.env.Validator.Verify(context.Background(), at.Token)
	if err != nil && !errors.Is(err, accesstoken.ErrInactive) {
		t.Fatal(err)
	}
	return err == nil
}

func forDialects(t *testing.T, fn func(t *testing.T, f *fixture)) {
	for _, d := range keytest.Dialects {
		t.Run(string(d), func(t *testing.T) {
			fn(t, newFixture(t, tokentest.New(t, d, tokentest.Options{})))
		})
	}
}

func TestRevokeAccessTokenEachMethod(t *testing.T) {
	forDialects(t, func(t *testing.T, f *fixture) {
		for _, c := range []*tokentest.Client{f.web, f.webPost, f.native, f.keyApp} {
			for _, jwt := range []bool{true, false} {
				t.Run(c.GetClientId()+map[bool]string{true: "/jwt", false: "/opaque"}[jwt], func(t *testing.T) {
					at := f.env.Access(t, c.Client, "user-alice", jwt, "openid")
					sibling := f.env.Access(t, c.Client, "user-alice", jwt, "openid")
					wantOK(t, f.revoke(t, c, at.Token, nil))
					if f.active(t, at) {
						t.Fatal("the revoked token is still active")
					}
					if revoked, err := f.env.Revoked.IsRevoked(context.Background(), at.ID); err != nil || !revoked {
						t.Fatalf("IsRevoked = %v, %v; want true", revoked, err)
					}
					if !f.active(t, sibling) {
						t.Fatal("revoking one access token revoked another")
					}
					// Revoking it again is still 200.
					wantOK(t, f.revoke(t, c, at.Token, nil))
				})
			}
		}
	})
}

func TestRevokeOtherClientsTokenChangesNothing(t *testing.T) {
	forDialects(t, func(t *testing.T, f *fixture) {
		for _, jwt := range []bool{true, false} {
			at := f.env.Access(t, f.ot.Client, "user-alice", jwt, "openid")
			wantOK(t, f.revoke(t, f.web, at.Token, nil))
			wantOK(t, f.revoke(t, f.web, at.Token, url.Values{"token_type_hint": {"access_token"}}))
			if !f.active(t, at) {
				t.Fatal("another client revoked the token")
			}
			if revoked, _ := f.env.Revoked.IsRevoked(context.Background(), at.ID); revoked {
				t.Fatal("the token is on the revocation list")
			}
		}
		f.refresh.add("rt-other", "other")
		wantOK(t, f.revoke(t, f.web, "rt-other", url.Values{"token_type_hint": {"refresh_token"}}))
		wantOK(t, f.revoke(t, f.web, "rt-other", nil))
		if _, revoked := f.refresh.state(); revoked["rt-other"] {
			t.Fatal("another client revoked the refresh token")
		}
	})
}

func TestRevokeRefreshToken(t *testing.T) {
	forDialects(t, func(t *testing.T, f *fixture) {
		for _, c := range []*tokentest.Client{f.web, f.webPost, f.native, f.keyApp} {
			for _, hint := range []string{"", "refresh_token", "access_token", "unknown_hint"} {
				raw := "rt-" + c.GetClientId() + "-" + hint
				f.refresh.add(raw, c.GetClientId())
				extra := url.Values{}
				if hint != "" {
					extra.Set("token_type_hint", hint)
				}
				wantOK(t, f.revoke(t, c, raw, extra))
				calls, revoked := f.refresh.state()
				if !revoked[raw] || calls[len(calls)-1] != raw+"/"+c.GetClientId() {
					t.Fatalf("%s hint %q: calls %v; want %s revoked for its client", c.GetClientId(), hint, calls, raw)
				}
			}
		}
	})
}

// TestRevokeHintOrdersLookups: with hint refresh_token the refresh store is
// asked first, and an access token is still revoked when it is not one;
// without the hint an access token never reaches the refresh store.
func TestRevokeHintOrdersLookups(t *testing.T) {
	f := newFixture(t, tokentest.New(t, keytest.Dialects[0], tokentest.Options{}))
	at := f.env.Access(t, f.web.Client, "user-alice", true, "openid")
	wantOK(t, f.revoke(t, f.web, at.Token, url.Values{"token_type_hint": {"refresh_token"}}))
	if calls, _ := f.refresh.state(); len(calls) != 1 || calls[0] != at.Token+"/web" {
		t.Fatalf("refresh store calls %v; want one for the hinted token", calls)
	}
	if f.active(t, at) {
		t.Fatal("access token with a refresh_token hint not revoked")
	}
	at2 := f.env.Access(t, f.web.Client, "user-alice", false, "openid")
	wantOK(t, f.revoke(t, f.web, at2.Token, nil))
	if calls, _ := f.refresh.state(); len(calls) != 1 {
		t.Fatalf("refresh store calls %v; want none for an access token without hint", calls)
	}
	if f.active(t, at2) {
		t.Fatal("access token not revoked")
	}
}

func TestRevokeUnknownToken(t *testing.T) {
	forDialects(t, func(t *testing.T, f *fixture) {
		for _, tok := range []string{"never-issued", "a.b.c", strings.Repeat("z", 300)} {
			wantOK(t, f.revoke(t, f.native, tok, nil))
		}
		expired := f.env.Access(t, f.web.Client, "user-alice", false, "openid")
		start := f.env.Clock.Now()
		f.env.Clock.Set(expired.ExpiresAt.Add(time.Second))
		wantOK(t, f.revoke(t, f.web, expired.Token, nil))
		f.env.Clock.Set(start)
	})
}

func TestRevokeClientAuthentication(t *testing.T) {
	forDialects(t, func(t *testing.T, f *fixture) {
		at := f.env.Access(t, f.web.Client, "user-alice", true, "openid")
		cases := []struct {
			name      string
			form      url.Values
			edit      func(*http.Request)
			status    int
			code      string
			challenge bool
		}{
			{name: "basic wrong secret", edit: tokentest.Basic("web", "wrong"), status: 401, code: "invalid_client", challenge: true},
			{name: "basic unknown client", edit: tokentest.Basic("nobody", "x"), status: 401, code: "invalid_client", challenge: true},
			{name: "post wrong secret", form: url.Values{"client_id": {"web-post"}, "client_secret": {"wrong"}}, status: 400, code: "invalid_client"},
			{name: "post for a basic client", form: url.Values{"client_id": {"web"}, "client_secret": {f.web.Secret}}, status: 400, code: "invalid_client"},
			{name: "none for a confidential client", form: url.Values{"client_id": {"web"}}, status: 400, code: "invalid_client"},
			{name: "none for an unknown client", form: url.Values{"client_id": {"nobody"}}, status: 400, code: "invalid_client"},
			{name: "no authentication", status: 400, code: "invalid_client"},
			{name: "assertion for another audience", form: url.Values{"client_assertion_type": {assertionType},
				"client_assertion": {f.env.Assertion(t, f.keyApp, "https://elsewhere.test")}}, status: 400, code: "invalid_client"},
			{name: "two methods", form: url.Values{"client_id": {"web-post"}, "client_secret": {f.webPost.Secret}},
				edit: tokentest.Basic("web", f.web.Secret), status: 400, code: "invalid_request"},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				form := url.Values{"token": {at.Token}}
				maps.Copy(form, tc.form)
				res := tokentest.Call(t, http.MethodPost, f.url, form, tc.edit)
				wantError(t, res, tc.status, tc.code)
				if got := res.Header.Get("WWW-Authenticate"); (got != "") != tc.challenge {
					t.Fatalf("WWW-Authenticate %q; want challenge %v", got, tc.challenge)
				}
				if !f.active(t, at) {
					t.Fatal("a refused request revoked the token")
				}
			})
		}
	})
}

func TestRevokeRequestErrors(t *testing.T) {
	f := newFixture(t, tokentest.New(t, keytest.Dialects[0], tokentest.Options{}))
	at := f.env.Access(t, f.web.Client, "user-alice", true, "openid")
	auth := tokentest.Basic("web", f.web.Secret)
	cases := []struct {
		name   string
		method string
		form   url.Values
		edit   func(*http.Request)
	}{
		{"GET", http.MethodGet, nil, auth},
		{"JSON body", http.MethodPost, url.Values{"token": {at.Token}}, func(r *http.Request) {
			auth(r)
			r.Header.Set("Content-Type", "application/json")
		}},
		{"missing token", http.MethodPost, url.Values{"token_type_hint": {"access_token"}}, auth},
		{"repeated token", http.MethodPost, url.Values{"token": {at.Token, at.Token}}, auth},
		{"repeated hint", http.MethodPost, url.Values{"token": {at.Token}, "token_type_hint": {"access_token", "refresh_token"}}, auth},
		{"token in the query only", http.MethodPost, url.Values{}, func(r *http.Request) {
			auth(r)
			r.URL.RawQuery = url.Values{"token": {at.Token}}.Encode()
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			wantError(t, tokentest.Call(t, tc.method, f.url, tc.form, tc.edit), http.StatusBadRequest, "invalid_request")
			if !f.active(t, at) {
				t.Fatal("a refused request revoked the token")
			}
		})
	}
}

func TestRevokeUnavailable(t *testing.T) {
	f := newFixture(t, tokentest.New(t, keytest.Dialects[0], tokentest.Options{}))
	at := f.env.Access(t, f.web.Client, "user-alice", true, "openid")
	f.list.fail.Store(true)
	res := f.revoke(t, f.web, at.Token, nil)
	wantError(t, res, http.StatusServiceUnavailable, "temporarily_unavailable")
	if res.Header.Get("Retry-After") == "" {
		t.Fatal("503 without Retry-After")
	}
	f.list.fail.Store(false)
	f.refresh.fail(errors.New("refresh store down"))
	wantError(t, f.revoke(t, f.web, "some-refresh-token", nil), http.StatusServiceUnavailable, "temporarily_unavailable")
	f.refresh.fail(nil)
	if !f.active(t, at) {
		t.Fatal("the failed revocation took effect")
	}
	wantOK(t, f.revoke(t, f.web, at.Token, nil))
	if f.active(t, at) {
		t.Fatal("the retried revocation did not take effect")
	}
}

// TestRevokeWithRedis: a revocation through the endpoint reaches Redis and
// another replica's list sees it.
func TestRevokeWithRedis(t *testing.T) {
	for _, d := range keytest.Dialects {
		t.Run(string(d), func(t *testing.T) {
			rdb, prefix := testutil.Redis(t)
			redisURL := testutil.RedisURL(t)
			env := tokentest.New(t, d, tokentest.Options{RedisURL: redisURL, RedisPrefix: prefix})
			f := newFixture(t, env)
			at := env.Access(t, f.web.Client, "user-alice", true, "openid")
			wantOK(t, f.revoke(t, f.web, at.Token, nil))
			ctx := context.Background()
			if n, err := rdb.Exists(ctx, prefix+"revoked:"+at.ID).Result(); err != nil || n != 1 {
				t.Fatalf("Redis entry: %d %v; want the revocation pushed", n, err)
			}
			replica, err := revocation.New(env.DB, revocation.Options{RedisURL: redisURL, Prefix: prefix, Logger: tokentest.Quiet, Now: env.Clock.Now})
			if err != nil {
				t.Fatal(err)
			}
			defer replica.Close()
			if revoked, err := replica.IsRevoked(ctx, at.ID); err != nil || !revoked {
				t.Fatalf("replica IsRevoked = %v, %v; want true", revoked, err)
			}
			if f.active(t, at) {
				t.Fatal("revoked token still active")
			}
		})
	}
}

func TestNewRequiresDependencies(t *testing.T) {
	env := tokentest.New(t, keytest.Dialects[0], tokentest.Options{})
	if _, err := revoke.New(env.Auth, env.Validator, env.Revoked, nil, nil); err == nil {
		t.Fatal("New without a RefreshRevoker succeeded")
	}
}
