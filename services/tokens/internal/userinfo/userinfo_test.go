package userinfo_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"connectrpc.com/connect"

	directoryv1 "github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/directory/v1"
	"github.com/gatehouse-id/gatehouse/services/tokens/accesstoken"
	"github.com/gatehouse-id/gatehouse/services/tokens/internal/introspection/tokentest"
	"github.com/gatehouse-id/gatehouse/services/tokens/internal/keys/keytest"
	"github.com/gatehouse-id/gatehouse/services/tokens/internal/userinfo"
)

var _ userinfo.AccessTokens = (*accesstoken.Verifier)(nil)

type fixture struct {
	env *tokentest.Env
	url string
	web *tokentest.Client
}

func newFixture(t *testing.T, env *tokentest.Env) *fixture {
	f := &fixture{env: env}
	f.web = env.AddClient(t, "web", "proj", directoryv1.ClientKind_CLIENT_KIND_OIDC_APP, directoryv1.AuthMethod_AUTH_METHOD_CLIENT_SECRET_BASIC)
	env.Dir.PutUser(tokentest.Alice())
	srv := httptest.NewServer(userinfo.New(env.Validator, env.Dir, tokentest.Quiet))
	t.Cleanup(srv.Close)
	f.url = srv.URL + userinfo.Path
	return f
}

func forDialects(t *testing.T, fn func(t *testing.T, f *fixture)) {
	for _, d := range keytest.Dialects {
		t.Run(string(d), func(t *testing.T) {
			fn(t, newFixture(t, tokentest.New(t, d, tokentest.Options{})))
		})
	}
}

// wantChallenge checks an RFC 6750 error: status, the challenge's error
// code, and the JSON body's code.
func wantChallenge(t *testing.T, res *tokentest.Response, status int, code string) {
	t.Helper()
	ch := res.Header.Get("WWW-Authenticate")
	if res.Status != status || !strings.HasPrefix(ch, `Bearer error="`+code+`", error_description="`) || res.Error() != code {
		t.Fatalf("got %d, WWW-Authenticate %q, body %s; want %d with Bearer error=%q", res.Status, ch, res.Body, status, code)
	}
	if res.Header.Get("Cache-Control") != "no-store" {
		t.Fatalf("Cache-Control %q; want no-store", res.Header.Get("Cache-Control"))
	}
}

func TestUserinfoClaims(t *testing.T) {
	forDialects(t, func(t *testing.T, f *fixture) {
		for _, jwt := range []bool{true, false} {
			name := map[bool]string{true: "jwt", false: "opaque"}[jwt]
			at := f.env.Access(t, f.web.Client, "user-alice", jwt, "openid", "profile", "email")
			want := map[string]any{"sub": "user-alice", "name": "Alice Liddell", "given_name": "Alice", "family_name": "Liddell",
				"preferred_username": "alice@example.test", "email": "alice@example.test", "email_verified": true}
			requests := map[string]func() *tokentest.Response{
				"GET header": func() *tokentest.Response {
					return tokentest.Call(t, http.MethodGet, f.url, nil, tokentest.Bearer(at.Token))
				},
				"POST header": func() *tokentest.Response {
					return tokentest.Call(t, http.MethodPost, f.url, nil, tokentest.Bearer(at.Token))
				},
				"POST body": func() *tokentest.Response {
					return tokentest.Call(t, http.MethodPost, f.url, url.Values{"access_token": {at.Token}}, nil)
				},
				"lower-case scheme": func() *tokentest.Response {
					return tokentest.Call(t, http.MethodGet, f.url, nil, func(r *http.Request) { r.Header.Set("Authorization", "bearer "+at.Token) })
				},
			}
			for how, call := range requests {
				t.Run(name+"/"+how, func(t *testing.T) {
					res := call()
					if res.Status != http.StatusOK || res.Header.Get("Cache-Control") != "no-store" ||
						!strings.HasPrefix(res.Header.Get("Content-Type"), "application/json") {
						t.Fatalf("got %d %v %s; want 200 JSON no-store", res.Status, res.Header, res.Body)
					}
					got := res.JSON(t)
					if len(got) != len(want) {
						t.Fatalf("got %v; want %v", got, want)
					}
					for k, v := range want {
						if got[k] != v {
							t.Fatalf("claim %s: got %v; want %v (all: %v)", k, got[k], v, got)
						}
					}
				})
			}
		}
		t.Run("only openid: sub alone", func(t *testing.T) {
			at := f.env.Access(t, f.web.Client, "user-alice", true, "openid")
			got := tokentest.Call(t, http.MethodGet, f.url, nil, tokentest.Bearer(at.Token)).JSON(t)
			if len(got) != 1 || got["sub"] != "user-alice" {
				t.Fatalf("got %v; want only sub", got)
			}
		})
		t.Run("phone and resource owner", func(t *testing.T) {
			at := f.env.Access(t, f.web.Client, "user-alice", false, "openid", "phone", "urn:gatehouse:iam:user:resourceowner")
			got := tokentest.Call(t, http.MethodGet, f.url, nil, tokentest.Bearer(at.Token)).JSON(t)
			if got["phone_number"] != "+41 44 123 45 67" || got["urn:gatehouse:iam:user:resourceowner:name"] != "Example" || got["email"] != nil {
				t.Fatalf("got %v; want phone and resource-owner claims only", got)
			}
		})
	})
}

func TestUserinfoInvalidToken(t *testing.T) {
	forDialects(t, func(t *testing.T, f *fixture) {
		ctx := context.Background()
		for _, jwt := range []bool{true, false} {
			name := map[bool]string{true: "jwt", false: "opaque"}[jwt]
			t.Run(name+"/revoked", func(t *testing.T) {
				at := f.env.Access(t, f.web.Client, "user-alice", jwt, "openid")
				if res := tokentest.Call(t, http.MethodGet, f.url, nil, tokentest.Bearer(at.Token)); res.Status != http.StatusOK {
					t.Fatalf("before revocation %d %s", res.Status, res.Body)
				}
				if err := f.env.Revoked.Revoke(ctx, at.ID, at.ExpiresAt); err != nil {
					t.Fatal(err)
				}
				wantChallenge(t, tokentest.Call(t, http.MethodGet, f.url, nil, tokentest.Bearer(at.Token)), 401, "invalid_token")
				wantChallenge(t, tokentest.Call(t, http.MethodPost, f.url, url.Values{"access_token": {at.Token}}, nil), 401, "invalid_token")
			})
			t.Run(name+"/expired", func(t *testing.T) {
				at := f.env.Access(t, f.web.Client, "user-alice", jwt, "openid")
				start := f.env.Clock.Now()
				defer f.env.Clock.Set(start)
				f.env.Clock.Set(at.ExpiresAt)
				wantChallenge(t, tokentest.Call(t, http.MethodGet, f.url, nil, tokentest.Bearer(at.Token)), 401, "invalid_token")
			})
			t.Run(name+"/user deleted", func(t *testing.T) {
				f.env.Dir.PutUser(&tokentest.User{ID: "user-bob"})
				at := f.env.Access(t, f.web.Client, "user-bob", jwt, "openid")
				f.env.Dir.DeleteUser("user-bob")
				wantChallenge(t, tokentest.Call(t, http.MethodGet, f.url, nil, tokentest.Bearer(at.Token)), 401, "invalid_token")
			})
		}
		t.Run("unknown and malformed", func(t *testing.T) {
			at := f.env.Access(t, f.web.Client, "user-alice", true, "openid")
			for _, tok := range []string{"never-issued", "a.b.c", at.Token + "x", strings.Repeat("y", 200)} {
				wantChallenge(t, tokentest.Call(t, http.MethodGet, f.url, nil, tokentest.Bearer(tok)), 401, "invalid_token")
			}
		})
		t.Run("without openid", func(t *testing.T) {
			at := f.env.Access(t, f.web.Client, "user-alice", true, "profile", "email")
			res := tokentest.Call(t, http.MethodGet, f.url, nil, tokentest.Bearer(at.Token))
			wantChallenge(t, res, 403, "insufficient_scope")
			if !strings.Contains(res.Header.Get("WWW-Authenticate"), `scope="openid"`) {
				t.Fatalf("challenge %q does not name the scope", res.Header.Get("WWW-Authenticate"))
			}
		})
	})
}

func TestUserinfoRequestErrors(t *testing.T) {
	f := newFixture(t, tokentest.New(t, keytest.Dialects[0], tokentest.Options{}))
	at := f.env.Access(t, f.web.Client, "user-alice", true, "openid")
	t.Run("no token: bare challenge", func(t *testing.T) {
		for _, res := range []*tokentest.Response{
			tokentest.Call(t, http.MethodGet, f.url, nil, nil),
			tokentest.Call(t, http.MethodPost, f.url, url.Values{"other": {"x"}}, nil),
			tokentest.Call(t, http.MethodGet, f.url, nil, tokentest.Basic("web", f.web.Secret)),
			// A form body is only read from a form-encoded POST.
			tokentest.Call(t, http.MethodPost, f.url, url.Values{"access_token": {at.Token}}, func(r *http.Request) {
				r.Header.Set("Content-Type", "text/plain")
			}),
		} {
			if res.Status != 401 || res.Header.Get("WWW-Authenticate") != "Bearer" || len(res.Body) != 0 {
				t.Fatalf("got %d, WWW-Authenticate %q, body %q; want 401 with a bare Bearer challenge", res.Status,
					res.Header.Get("WWW-Authenticate"), res.Body)
			}
		}
	})
	cases := []struct {
		name   string
		method string
		form   url.Values
		edit   func(*http.Request)
	}{
		{"header and body", http.MethodPost, url.Values{"access_token": {at.Token}}, tokentest.Bearer(at.Token)},
		{"token in the query", http.MethodGet, nil, func(r *http.Request) { r.URL.RawQuery = "access_token=" + at.Token }},
		{"query beside the header", http.MethodGet, nil, func(r *http.Request) {
			r.Header.Set("Authorization", "Bearer "+at.Token)
			r.URL.RawQuery = "access_token=" + at.Token
		}},
		{"repeated access_token", http.MethodPost, url.Values{"access_token": {at.Token, at.Token}}, nil},
		{"empty access_token", http.MethodPost, url.Values{"access_token": {""}}, nil},
		{"empty Bearer", http.MethodGet, nil, func(r *http.Request) { r.Header.Set("Authorization", "Bearer ") }},
		{"two Authorization headers", http.MethodGet, nil, func(r *http.Request) {
			r.Header.Add("Authorization", "Bearer "+at.Token)
			r.Header.Add("Authorization", "Bearer "+at.Token)
		}},
		{"repeated parameter name is not echoed raw", http.MethodPost, url.Values{`a"b\`: {"1", "2"}}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res := tokentest.Call(t, tc.method, f.url, tc.form, tc.edit)
			wantChallenge(t, res, 400, "invalid_request")
			ch := res.Header.Get("WWW-Authenticate")
			if desc := ch[strings.Index(ch, `error_description="`)+len(`error_description="`):]; strings.ContainsAny(strings.TrimSuffix(desc, `"`), `"\`) {
				t.Fatalf("challenge %q has unescaped characters", ch)
			}
		})
	}
	t.Run("other methods", func(t *testing.T) {
		res := tokentest.Call(t, http.MethodPut, f.url, nil, tokentest.Bearer(at.Token))
		if res.Status != http.StatusMethodNotAllowed || res.Header.Get("Allow") != "GET, POST" {
			t.Fatalf("got %d Allow %q; want 405 GET, POST", res.Status, res.Header.Get("Allow"))
		}
	})
	t.Run("directory unavailable", func(t *testing.T) {
		f.env.Dir.FailClaims(connect.NewError(connect.CodeUnavailable, errors.New("directory down")))
		defer f.env.Dir.FailClaims(nil)
		res := tokentest.Call(t, http.MethodGet, f.url, nil, tokentest.Bearer(at.Token))
		if res.Status != http.StatusServiceUnavailable || res.Error() != "temporarily_unavailable" || res.Header.Get("Retry-After") == "" {
			t.Fatalf("got %d %v %s; want 503 temporarily_unavailable with Retry-After", res.Status, res.Header, res.Body)
		}
	})
}
