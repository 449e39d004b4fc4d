package introspection_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	directoryv1 "github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/directory/v1"
	"github.com/gatehouse-id/gatehouse/pkg/secrets"
	"github.com/gatehouse-id/gatehouse/pkg/testutil"
	"github.com/gatehouse-id/gatehouse/services/tokens/internal/clients"
	"github.com/gatehouse-id/gatehouse/services/tokens/internal/introspection"
	"github.com/gatehouse-id/gatehouse/services/tokens/internal/introspection/tokentest"
	"github.com/gatehouse-id/gatehouse/services/tokens/internal/keys/keytest"
	"github.com/gatehouse-id/gatehouse/services/tokens/internal/kind"
	"github.com/gatehouse-id/gatehouse/services/tokens/internal/store"
)

const (
	apiApp  = directoryv1.ClientKind_CLIENT_KIND_API_APP
	oidcApp = directoryv1.ClientKind_CLIENT_KIND_OIDC_APP
	machine = directoryv1.ClientKind_CLIENT_KIND_MACHINE_USER
	basic   = directoryv1.AuthMethod_AUTH_METHOD_CLIENT_SECRET_BASIC
	post    = directoryv1.AuthMethod_AUTH_METHOD_CLIENT_SECRET_POST
	none    = directoryv1.AuthMethod_AUTH_METHOD_NONE
	keyJWT  = directoryv1.AuthMethod_AUTH_METHOD_PRIVATE_KEY_JWT
)

var _ introspection.ClientAuthenticator = (*clients.Authenticator)(nil)

// fixture is an introspection endpoint over real HTTP with its clients.
type fixture struct {
	env                     *tokentest.Env
	url                     string
	api, apiJWT, web, other *tokentest.Client
	webPost, native, robot  *tokentest.Client
}

func newFixture(t *testing.T, env *tokentest.Env) *fixture {
	f := &fixture{env: env}
	f.api = env.AddClient(t, "api-basic", "proj-api", apiApp, basic)
	f.apiJWT = env.AddClient(t, "api-jwt", "proj-jwt", apiApp, keyJWT)
	f.web = env.AddClient(t, "web", "proj-api", oidcApp, basic)
	f.other = env.AddClient(t, "other", "proj-other", oidcApp, basic)
	f.webPost = env.AddClient(t, "web-post", "proj-api", oidcApp, post)
	f.native = env.AddClient(t, "native", "proj-api", oidcApp, none)
	f.robot = env.AddClient(t, "robot", "", machine, basic)
	env.Dir.PutUser(tokentest.Alice())
	env.Dir.PutUser(&tokentest.User{ID: f.robot.GetId(), LoginName: "robot@example.test"})
	srv := httptest.NewServer(introspection.NewEndpoint(env.Validator, env.Auth, env.Dir, tokentest.Quiet))
	t.Cleanup(srv.Close)
	f.url = srv.URL + introspection.Path
	return f
}

// asBasic introspects token as client c with client_secret_basic.
func (f *fixture) asBasic(t *testing.T, c *tokentest.Client, token string) *tokentest.Response {
	t.Helper()
	return tokentest.Call(t, http.MethodPost, f.url, url.Values{"token": {token}}, tokentest.Basic(c.GetClientId(), c.Secret))
}

// asKey introspects token as client c with private_key_jwt.
func (f *fixture) asKey(t *testing.T, c *tokentest.Client, token string) *tokentest.Response {
	t.Helper()
	return tokentest.Call(t, http.MethodPost, f.url, url.Values{"token": {token},
		"client_assertion_type": {"urn:ietf:params:oauth:client-assertion-type:jwt-bearer"},
		"client_assertion":      {f.env.Assertion(t, c, "")}}, nil)
}

func forDialects(t *testing.T, fn func(t *testing.T, f *fixture)) {
	for _, d := range keytest.Dialects {
		t.Run(string(d), func(t *testing.T) {
			fn(t, newFixture(t, tokentest.New(t, d, tokentest.Options{})))
		})
	}
}

func wantInactive(t *testing.T, res *tokentest.Response) {
	t.Helper()
	if res.Status != http.StatusOK || strings.TrimSpace(string(res.Body)) != `{"active":false}` {
		t.Fatalf("got %d %s; want 200 {\"active\":false} and nothing else", res.Status, res.Body)
	}
	if res.Header.Get("Cache-Control") != "no-store" {
		t.Fatalf("Cache-Control %q; want no-store", res.Header.Get("Cache-Control"))
	}
}

func wantError(t *testing.T, res *tokentest.Response, status int, code string) {
	t.Helper()
	if res.Status != status || res.Error() != code {
		t.Fatalf("got %d %s; want %d %s", res.Status, res.Body, status, code)
	}
	if res.Header.Get("Cache-Control") != "no-store" {
		t.Fatalf("Cache-Control %q; want no-store", res.Header.Get("Cache-Control"))
	}
}

func TestIntrospectActive(t *testing.T) {
	forDialects(t, func(t *testing.T, f *fixture) {
		for _, jwt := range []bool{true, false} {
			name := map[bool]string{true: "jwt", false: "opaque"}[jwt]
			t.Run(name+"/basic, in audience by project", func(t *testing.T) {
				at := f.env.Access(t, f.web.Client, "user-alice", jwt, "openid", "profile", "email")
				res := f.asBasic(t, f.api, at.Token)
				if res.Status != http.StatusOK || res.Header.Get("Cache-Control") != "no-store" ||
					!strings.HasPrefix(res.Header.Get("Content-Type"), "application/json") {
					t.Fatalf("got %d %v %s; want 200 JSON no-store", res.Status, res.Header, res.Body)
				}
				got := res.JSON(t)
				now := f.env.Clock.Now().Unix()
				want := map[string]any{
					"active": true, "aud": []any{"web", "proj-api"}, "client_id": "web",
					"exp": float64(at.ExpiresAt.Unix()), "iat": float64(now), "nbf": float64(now),
					"iss": tokentest.Issuer, "jti": at.ID, "scope": "openid profile email", "token_type": "Bearer",
					"sub": "user-alice", "username": "alice@example.test",
					"name": "Alice Liddell", "given_name": "Alice", "family_name": "Liddell",
					"preferred_username": "alice@example.test", "email": "alice@example.test", "email_verified": true,
				}
				if !equalJSON(got, want) {
					t.Fatalf("got %v; want %v", got, want)
				}
			})
			t.Run(name+"/private_key_jwt, in audience by client_id", func(t *testing.T) {
				// The whole audience is the client: it may introspect.
				at := f.env.AccessWithAudience(t, "web", "user-alice", jwt, []string{"api-jwt"},
					"openid", "phone", "urn:gatehouse:iam:user:resourceowner")
				got := f.asKey(t, f.apiJWT, at.Token).JSON(t)
				if got["active"] != true || got["phone_number"] != "+41 44 123 45 67" ||
					got["urn:gatehouse:iam:user:resourceowner:id"] != "org-1" || got["scope"] != "openid phone urn:gatehouse:iam:user:resourceowner" {
					t.Fatalf("got %v; want active with phone and resource-owner claims", got)
				}
				for _, k := range []string{"email", "name"} {
					if _, ok := got[k]; ok {
						t.Errorf("claim %s present without its scope: %v", k, got)
					}
				}
			})
		}
		t.Run("machine user introspects its own token", func(t *testing.T) {
			at := f.env.Access(t, f.robot.Client, f.robot.GetId(), true)
			got := f.asBasic(t, f.robot, at.Token).JSON(t)
			if got["active"] != true || got["sub"] != f.robot.GetId() || got["username"] != "robot@example.test" || got["scope"] != "" {
				t.Fatalf("got %v; want active robot token", got)
			}
		})
		t.Run("token_type_hint is ignored", func(t *testing.T) {
			at := f.env.Access(t, f.web.Client, "user-alice", true, "openid")
			res := tokentest.Call(t, http.MethodPost, f.url, url.Values{"token": {at.Token}, "token_type_hint": {"refresh_token"}},
				tokentest.Basic("api-basic", f.api.Secret))
			if got := res.JSON(t); got["active"] != true {
				t.Fatalf("got %v; want active", got)
			}
		})
	})
}

func TestIntrospectInactive(t *testing.T) {
	forDialects(t, func(t *testing.T, f *fixture) {
		ctx := context.Background()
		for _, jwt := range []bool{true, false} {
			name := map[bool]string{true: "jwt", false: "opaque"}[jwt]
			t.Run(name+"/foreign audience", func(t *testing.T) {
				at := f.env.Access(t, f.other.Client, "user-alice", jwt, "openid", "profile")
				wantInactive(t, f.asBasic(t, f.api, at.Token))
				// The same token is active for a client in its audience.
				if got := f.asBasic(t, f.other, at.Token).JSON(t); got["active"] != true {
					t.Fatalf("owner sees %v; want active", got)
				}
			})
			t.Run(name+"/another client's id among several audiences", func(t *testing.T) {
				// With several audiences a client id binds only the client
				// the token was issued to (azp): an injected one does not.
				at := f.env.AccessWithAudience(t, "web", "user-alice", jwt, []string{"web", "api-jwt"}, "openid")
				wantInactive(t, f.asKey(t, f.apiJWT, at.Token))
				if got := f.asBasic(t, f.web, at.Token).JSON(t); got["active"] != true {
					t.Fatalf("the token's own client sees %v; want active", got)
				}
			})
			t.Run(name+"/revoked", func(t *testing.T) {
				at := f.env.Access(t, f.web.Client, "user-alice", jwt, "openid")
				if got := f.asBasic(t, f.api, at.Token).JSON(t); got["active"] != true {
					t.Fatalf("before revocation %v; want active", got)
				}
				if err := f.env.Revoked.Revoke(ctx, at.ID, at.ExpiresAt); err != nil {
					t.Fatal(err)
				}
				wantInactive(t, f.asBasic(t, f.api, at.Token))
			})
			t.Run(name+"/user deleted or deactivated", func(t *testing.T) {
				f.env.Dir.PutUser(&tokentest.User{ID: "user-bob", LoginName: "bob@example.test"})
				at := f.env.Access(t, f.web.Client, "user-bob", jwt, "openid")
				f.env.Dir.PutUser(&tokentest.User{ID: "user-bob", Gone: true})
				wantInactive(t, f.asBasic(t, f.api, at.Token))
				f.env.Dir.DeleteUser("user-bob")
				wantInactive(t, f.asBasic(t, f.api, at.Token))
			})
		}
		t.Run("unknown and malformed", func(t *testing.T) {
			at := f.env.Access(t, f.web.Client, "user-alice", true, "openid")
			// Verified (and remembered) first: a tampered copy is not the
			// same token.
			if got := f.asBasic(t, f.api, at.Token).JSON(t); got["active"] != true {
				t.Fatalf("untampered token: %v; want active", got)
			}
			tampered := at.Token[:len(at.Token)-4] + flip(at.Token[len(at.Token)-4:])
			for _, tok := range []string{"unknown-opaque-token", "a.b.c", tampered, strings.Repeat("x", 5000)} {
				wantInactive(t, f.asBasic(t, f.api, tok))
			}
		})
		t.Run("opaque remembered", func(t *testing.T) {
			// The row of an opaque token never changes (revocation is a
			// separate list): once found, the store is not asked again.
			at := f.env.Access(t, f.web.Client, "user-alice", false, "openid")
			if got := f.asBasic(t, f.api, at.Token).JSON(t); got["active"] != true {
				t.Fatalf("first introspection: %v; want active", got)
			}
			if _, err := f.env.DB.Exec(ctx, `DELETE FROM access_tokens WHERE id = ?`, at.ID); err != nil {
				t.Fatal(err)
			}
			if got := f.asBasic(t, f.api, at.Token).JSON(t); got["active"] != true {
				t.Fatalf("second introspection: %v; want active from memory", got)
			}
			if err := f.env.Revoked.Revoke(ctx, at.ID, at.ExpiresAt); err != nil {
				t.Fatal(err)
			}
			wantInactive(t, f.asBasic(t, f.api, at.Token))
		})
		t.Run("expired", func(t *testing.T) {
			jwtTok := f.env.Access(t, f.web.Client, "user-alice", true, "openid")
			opaque := f.env.Access(t, f.web.Client, "user-alice", false, "openid")
			for _, tok := range []string{jwtTok.Token, opaque.Token} { // remembered while valid
				if got := f.asBasic(t, f.api, tok).JSON(t); got["active"] != true {
					t.Fatalf("before expiry: %v; want active", got)
				}
			}
			start := f.env.Clock.Now()
			defer f.env.Clock.Set(start)
			f.env.Clock.Set(jwtTok.ExpiresAt)
			wantInactive(t, f.asBasic(t, f.api, jwtTok.Token))
			wantInactive(t, f.asBasic(t, f.api, opaque.Token))
		})
	})
}

func TestIntrospectClientAuthentication(t *testing.T) {
	forDialects(t, func(t *testing.T, f *fixture) {
		at := f.env.AccessWithAudience(t, "web", "user-alice", true, []string{"web", "proj-api", "proj-jwt"}, "openid")
		assertionType := "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
		stranger := &tokentest.Client{Client: f.apiJWT.Client, KeyID: f.apiJWT.KeyID}
		stranger.Key = f.env.AddClient(t, "unrelated-key-holder", "", apiApp, keyJWT).Key
		inactive := f.env.AddClient(t, "api-inactive", "proj-api", apiApp, basic)
		inactive.Active = false
		replayed := f.env.Assertion(t, f.apiJWT, "")
		if got := tokentest.Call(t, http.MethodPost, f.url, url.Values{"token": {at.Token}, "client_assertion_type": {assertionType},
			"client_assertion": {replayed}}, nil); got.Status != http.StatusOK {
			t.Fatalf("first use of the assertion: %d %s", got.Status, got.Body)
		}
		cases := []struct {
			name      string
			form      url.Values
			edit      func(*http.Request)
			status    int
			code      string
			challenge bool
		}{
			{name: "client_secret_basic", edit: tokentest.Basic("api-basic", f.api.Secret), status: 200},
			{name: "private_key_jwt", form: url.Values{"client_assertion_type": {assertionType},
				"client_assertion": {f.env.Assertion(t, f.apiJWT, "")}}, status: 200},
			{name: "private_key_jwt with client_id", form: url.Values{"client_id": {"api-jwt"}, "client_assertion_type": {assertionType},
				"client_assertion": {f.env.Assertion(t, f.apiJWT, "")}}, status: 200},
			{name: "client_secret_post refused", form: url.Values{"client_id": {"web-post"}, "client_secret": {f.webPost.Secret}},
				status: 401, code: "invalid_client", challenge: true},
			{name: "none refused", form: url.Values{"client_id": {"native"}}, status: 401, code: "invalid_client", challenge: true},
			{name: "no authentication", status: 401, code: "invalid_client", challenge: true},
			{name: "wrong secret", edit: tokentest.Basic("api-basic", "wrong"), status: 401, code: "invalid_client", challenge: true},
			{name: "unknown client", edit: tokentest.Basic("nobody", "x"), status: 401, code: "invalid_client", challenge: true},
			{name: "inactive client", edit: tokentest.Basic("api-inactive", inactive.Secret), status: 401, code: "invalid_client", challenge: true},
			{name: "basic for a private_key_jwt client", edit: tokentest.Basic("api-jwt", "x"), status: 401, code: "invalid_client", challenge: true},
			{name: "assertion signed by another key", form: url.Values{"client_assertion_type": {assertionType},
				"client_assertion": {f.env.Assertion(t, stranger, "")}}, status: 401, code: "invalid_client", challenge: true},
			{name: "replayed assertion", form: url.Values{"client_assertion_type": {assertionType},
				"client_assertion": {replayed}}, status: 401, code: "invalid_client", challenge: true},
			{name: "assertion for another audience", form: url.Values{"client_assertion_type": {assertionType},
				"client_assertion": {f.env.Assertion(t, f.apiJWT, "https://elsewhere.test")}}, status: 401, code: "invalid_client", challenge: true},
			{name: "wrong assertion type", form: url.Values{"client_assertion_type": {"urn:other"},
				"client_assertion": {f.env.Assertion(t, f.apiJWT, "")}}, status: 400, code: "invalid_request"},
			{name: "two methods", form: url.Values{"client_assertion_type": {assertionType},
				"client_assertion": {f.env.Assertion(t, f.apiJWT, "")}}, edit: tokentest.Basic("api-basic", f.api.Secret),
				status: 400, code: "invalid_request"},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				form := url.Values{"token": {at.Token}}
				maps.Copy(form, tc.form)
				res := tokentest.Call(t, http.MethodPost, f.url, form, tc.edit)
				if tc.status == 200 {
					if got := res.JSON(t); res.Status != 200 || got["active"] != true {
						t.Fatalf("got %d %v; want 200 active", res.Status, got)
					}
					return
				}
				wantError(t, res, tc.status, tc.code)
				if got := res.Header.Get("WWW-Authenticate"); (got != "") != tc.challenge || (tc.challenge && !strings.HasPrefix(got, "Basic")) {
					t.Fatalf("WWW-Authenticate %q; want a Basic challenge: %v", got, tc.challenge)
				}
			})
		}
	})
}

func TestIntrospectRequestErrors(t *testing.T) {
	f := newFixture(t, tokentest.New(t, keytest.Dialects[0], tokentest.Options{}))
	at := f.env.Access(t, f.web.Client, "user-alice", true, "openid")
	auth := tokentest.Basic("api-basic", f.api.Secret)
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
		{"empty token", http.MethodPost, url.Values{"token": {""}}, auth},
		{"repeated token", http.MethodPost, url.Values{"token": {at.Token, at.Token}}, auth},
		{"repeated client_assertion", http.MethodPost, url.Values{"token": {at.Token}, "client_assertion": {"a", "b"}}, nil},
		{"Bearer instead of Basic", http.MethodPost, url.Values{"token": {at.Token}}, tokentest.Bearer(at.Token)},
		{"malformed body", http.MethodPost, url.Values{}, func(r *http.Request) {
			auth(r)
			r.Body = http.NoBody
			r.ContentLength = 0
			r.URL.RawQuery = "token=%zz"
		}},
		{"oversized body", http.MethodPost, url.Values{"token": {strings.Repeat("x", 70<<10)}}, auth},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			wantError(t, tokentest.Call(t, tc.method, f.url, tc.form, tc.edit), http.StatusBadRequest, "invalid_request")
		})
	}
}

func TestIntrospectDirectoryUnavailable(t *testing.T) {
	f := newFixture(t, tokentest.New(t, keytest.Dialects[0], tokentest.Options{}))
	at := f.env.Access(t, f.web.Client, "user-alice", true, "openid")
	f.env.Dir.FailClaims(connect.NewError(connect.CodeUnavailable, errors.New("directory down")))
	res := f.asBasic(t, f.api, at.Token)
	wantError(t, res, http.StatusServiceUnavailable, "temporarily_unavailable")
	if res.Header.Get("Retry-After") == "" {
		t.Fatal("503 without Retry-After")
	}
	f.env.Dir.FailClaims(nil)
	if got := f.asBasic(t, f.api, at.Token).JSON(t); got["active"] != true {
		t.Fatalf("after recovery %v; want active", got)
	}
}

// TestIntrospectRedisRevocation: a token revoked through a Redis-backed
// list (another replica's view) is inactive.
func TestIntrospectRedisRevocation(t *testing.T) {
	for _, d := range keytest.Dialects {
		t.Run(string(d), func(t *testing.T) {
			rdb, prefix := testutil.Redis(t)
			env := tokentest.New(t, d, tokentest.Options{RedisURL: testutil.RedisURL(t), RedisPrefix: prefix})
			f := newFixture(t, env)
			at := env.Access(t, f.web.Client, "user-alice", true, "openid")
			if got := f.asBasic(t, f.api, at.Token).JSON(t); got["active"] != true {
				t.Fatalf("before revocation %v; want active", got)
			}
			if err := env.Revoked.Revoke(context.Background(), at.ID, at.ExpiresAt); err != nil {
				t.Fatal(err)
			}
			if n, err := rdb.Exists(context.Background(), prefix+"revoked:"+at.ID).Result(); err != nil || n != 1 {
				t.Fatalf("Redis entry: %d %v; want the revocation pushed", n, err)
			}
			wantInactive(t, f.asBasic(t, f.api, at.Token))
		})
	}
}

func flip(s string) string {
	b := []byte(s)
	for i := range b {
		if b[i] == 'A' {
			b[i] = 'B'
		} else {
			b[i] = 'A'
		}
	}
	return string(b)
}

// equalJSON compares decoded JSON objects (values are float64, string,
// bool, []any, map[string]any).
func equalJSON(got, want map[string]any) bool {
	if len(got) != len(want) {
		return false
	}
	for k, w := range want {
		g, ok := got[k]
		if !ok {
			return false
		}
		if ws, ok := w.([]any); ok {
			gs, ok := g.([]any)
			if !ok || !slices.Equal(gs, ws) {
				return false
			}
			continue
		}
		if g != w {
			return false
		}
	}
	return true
}

// TestOpaqueTokenRecordKeys: an opaque token is its kind's prefix and an
// ordered token; its record is keyed by its issue time first
// (secrets.TokenKey), so inserts append to the index on the key; tokens
// issued before prefixes, or before ordered tokens (keyed by their plain
// HMAC), are still found. The token has one spelling: without its prefix,
// or with another kind's, it is nobody's.
func TestOpaqueTokenRecordKeys(t *testing.T) {
	forDialects(t, func(t *testing.T, f *fixture) {
		ctx := context.Background()
		at := f.env.Access(t, f.web.Client, "user-alice", false, "openid")
		ordered, prefixed := strings.CutPrefix(at.Token, kind.AccessPrefix)
		if !prefixed || len(ordered) != secrets.OrderedTokenLen {
			t.Fatalf("opaque token %q; want %s and an ordered token of %d characters", at.Token, kind.AccessPrefix, secrets.OrderedTokenLen)
		}
		var key []byte
		if err := f.env.DB.Get(ctx, &key, `SELECT token_hash FROM access_tokens WHERE id = ?`, at.ID); err != nil {
			t.Fatal(err)
		}
		raw, _ := base64.RawURLEncoding.DecodeString(ordered)
		if !bytes.Equal(key, f.env.Hasher.TokenKey(at.Token)) || !bytes.Equal(key[:6], raw[:6]) {
			t.Fatalf("record key %x; want the token's time bytes %x, then its HMAC", key, raw[:6])
		}
		if got := f.asBasic(t, f.api, at.Token).JSON(t); got["active"] != true || got["jti"] != at.ID {
			t.Fatalf("ordered token: %v; want active", got)
		}

		now := f.env.Clock.Now()
		for name, old := range map[string]string{
			"before ordered tokens": secrets.RandomToken(32),
			"before prefixes":       secrets.NewOrderedToken(),
		} {
			rec := store.NewAccessToken(secrets.NewTokenID(), f.env.Hasher.TokenKey(old), "web", "user-alice", "org-1",
				[]string{"openid"}, []string{"web", "proj-api"}, nil, now, now.Add(time.Hour))
			if err := f.env.Store.InsertAccessToken(ctx, nil, rec); err != nil {
				t.Fatal(err)
			}
			if got := f.asBasic(t, f.api, old).JSON(t); got["active"] != true || got["jti"] != rec.ID {
				t.Fatalf("token issued %s: %v; want active", name, got)
			}
		}
		// Another time, no prefix, or another kind's prefix finds nothing.
		wantInactive(t, f.asBasic(t, f.api, kind.AccessPrefix+"AAAAAAAA"+ordered[8:]))
		wantInactive(t, f.asBasic(t, f.api, ordered))
		wantInactive(t, f.asBasic(t, f.api, kind.RefreshPrefix+ordered))
	})
}
