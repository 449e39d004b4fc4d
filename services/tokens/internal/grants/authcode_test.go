package grants_test

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"

	"github.com/gatehouse-id/gatehouse/services/tokens/internal/introspection/tokentest"
	"github.com/gatehouse-id/gatehouse/services/tokens/internal/keys"
	"github.com/gatehouse-id/gatehouse/services/tokens/internal/lifecycle"
)

// TestAuthorizationCodeEachMethod exchanges a code with each client
// authentication method and checks the whole response: access token
// (active, JWT or opaque per the client), ID token claims, refresh token.
func TestAuthorizationCodeEachMethod(t *testing.T) {
	forDialects(t, options{}, func(t *testing.T, f *fixture) {
		for _, c := range []*tokentest.Client{f.basic, f.post, f.public, f.keyed} {
			t.Run(c.GetClientId(), func(t *testing.T) {
				code := f.code(t, login{client: c, session: "sess-" + c.GetClientId()})
				tk := wantTokens(t, f.exchange(t, c, code))
				if tk.Scope != "openid profile email offline_access" {
					t.Errorf("scope %q; want the granted scopes", tk.Scope)
				}
				if tk.ExpiresIn != int64((15 * time.Minute).Seconds()) {
					t.Errorf("expires_in %d; want 900", tk.ExpiresIn)
				}
				if tk.RefreshToken == "" || tk.IDToken == "" {
					t.Fatalf("response %+v; want id_token and refresh_token", tk)
				}
				if isJWT := strings.Count(tk.AccessToken, ".") == 2; isJWT != (c.GetAccessTokenType() == 2) {
					t.Errorf("access token %q: JWT %v; want the client's type %v", tk.AccessToken, isJWT, c.GetAccessTokenType())
				}
				if !f.active(t, tk.AccessToken) {
					t.Error("the access token is not active")
				}
				id := f.claims(t, tk.IDToken)
				want := map[string]any{"iss": tokentest.Issuer, "sub": aliceID, "azp": c.GetClientId(), "nonce": "nonce-1",
					"sid": "sess-" + c.GetClientId(), "at_hash": halfHash(tk.AccessToken),
					"auth_time": float64(f.Clock.Now().Add(-time.Minute).Unix())}
				for k, v := range want {
					if id[k] != v {
						t.Errorf("id_token %s = %v; want %v", k, id[k], v)
					}
				}
				if aud := strs(id["aud"]); !slices.Equal(aud, []string{c.GetClientId(), c.GetProjectId()}) {
					t.Errorf("id_token aud %v; want client_id and project id", aud)
				}
				if amr := strs(id["amr"]); !slices.Equal(amr, []string{"pwd"}) {
					t.Errorf("amr %v; want [pwd]", amr)
				}
				for _, k := range []string{"email", "name"} {
					if _, ok := id[k]; ok {
						t.Errorf("id_token has %s without id_token_userinfo_assertion", k)
					}
				}
				// The refresh token works with the same client.
				wantTokens(t, f.refresh(t, c, tk.RefreshToken, nil))
			})
		}
	})
}

// TestAuthorizationCodeGoOIDC verifies the ID token with go-oidc against
// the real key set, for RS256 and ES256, including at_hash.
func TestAuthorizationCodeGoOIDC(t *testing.T) {
	for _, alg := range []string{keys.RS256, keys.ES256} {
		t.Run(alg, func(t *testing.T) {
			f := newFixture(t, "sqlite", options{Options: tokentest.Options{Algorithm: alg}})
			tk := wantTokens(t, f.exchange(t, f.basic, f.code(t, login{client: f.basic})))
			ctx := context.Background()
			v := oidc.NewVerifier(tokentest.Issuer, oidc.NewRemoteKeySet(ctx, f.base+"/oauth/v2/keys"),
				&oidc.Config{ClientID: f.basic.GetClientId(), SupportedSigningAlgs: []string{alg}, Now: f.Clock.Now})
			idt, err := v.Verify(ctx, tk.IDToken)
			if err != nil {
				t.Fatalf("go-oidc: %v", err)
			}
			if idt.Nonce != "nonce-1" || idt.Subject != aliceID {
				t.Errorf("nonce %q sub %q; want nonce-1 %s", idt.Nonce, idt.Subject, aliceID)
			}
			if err := idt.VerifyAccessToken(tk.AccessToken); err != nil {
				t.Errorf("at_hash: %v", err)
			}
			if err := idt.VerifyAccessToken(tk.AccessToken + "x"); err == nil {
				t.Error("at_hash accepted another access token")
			}
		})
	}
}

// TestAuthorizationCodeUserinfoAssertion: with id_token_userinfo_assertion
// the ID token carries the user's claims for the granted scopes.
func TestAuthorizationCodeUserinfoAssertion(t *testing.T) {
	f := newFixture(t, "sqlite", options{})
	f.post.IdTokenUserinfoAssertion = true
	tk := wantTokens(t, f.exchange(t, f.post, f.code(t, login{client: f.post, scopes: []string{"openid", "email"}})))
	id := f.claims(t, tk.IDToken)
	if id["email"] != "alice@example.test" || id["email_verified"] != true {
		t.Errorf("id_token %v; want the email claims", id)
	}
	if _, ok := id["name"]; ok {
		t.Error("id_token has profile claims without the profile scope")
	}
	if id["sub"] != aliceID {
		t.Errorf("sub %v; want %s", id["sub"], aliceID)
	}
}

// TestAuthorizationCodeRefreshOnlyWhenAllowed: no refresh token without
// offline_access, nor for a client without the refresh_token grant (then
// offline_access is not reported as granted).
func TestAuthorizationCodeRefreshOnlyWhenAllowed(t *testing.T) {
	forDialects(t, options{}, func(t *testing.T, f *fixture) {
		tk := wantTokens(t, f.exchange(t, f.post, f.code(t, login{client: f.post, scopes: []string{"openid", "email"}})))
		if tk.RefreshToken != "" || tk.Scope != "openid email" {
			t.Errorf("without offline_access: refresh %q scope %q; want none and openid email", tk.RefreshToken, tk.Scope)
		}
		tk = wantTokens(t, f.exchange(t, f.noRefresh, f.code(t, login{client: f.noRefresh})))
		if tk.RefreshToken != "" || strings.Contains(tk.Scope, "offline_access") {
			t.Errorf("client without refresh_token grant: refresh %q scope %q; want none", tk.RefreshToken, tk.Scope)
		}
	})
}

// TestAuthorizationCodeRefused covers every error of the grant; each
// refused request leaves the code usable (nothing changes).
func TestAuthorizationCodeRefused(t *testing.T) {
	forDialects(t, options{}, func(t *testing.T, f *fixture) {
		code := f.code(t, login{client: f.basic})
		pub := f.code(t, login{client: f.public})
		withChallenge := f.code(t, login{client: f.post, challenge: lifecycle.S256(verifier)})
		plain := f.code(t, login{client: f.post})
		grant := func(code string) url.Values {
			return url.Values{"grant_type": {"authorization_code"}, "code": {code}, "redirect_uri": {redirectURI}}
		}
		with := func(v url.Values, k, val string) url.Values {
			v.Set(k, val)
			return v
		}
		without := func(v url.Values, k string) url.Values {
			v.Del(k)
			return v
		}
		cases := []struct {
			name   string
			client *tokentest.Client
			params url.Values
			edit   func(*http.Request)
			status int
			code   string
		}{
			{"missing code", f.basic, without(grant(code), "code"), nil, 400, "invalid_request"},
			{"missing redirect_uri", f.basic, without(grant(code), "redirect_uri"), nil, 400, "invalid_request"},
			{"unknown code", f.basic, grant("not-a-code"), nil, 400, "invalid_grant"},
			{"redirect_uri mismatch", f.basic, with(grant(code), "redirect_uri", "https://app.example.test/other"), nil, 400, "invalid_grant"},
			{"redirect_uri with a trailing slash", f.basic, with(grant(code), "redirect_uri", redirectURI+"/"), nil, 400, "invalid_grant"},
			{"another client's code", f.other, grant(code), nil, 400, "invalid_grant"},
			{"repeated parameter", f.basic, grant(code), nil, 400, "invalid_request"},
			{"public client without verifier", f.public, grant(pub), nil, 400, "invalid_request"},
			{"public client, wrong verifier", f.public, with(grant(pub), "code_verifier", strings.Repeat("a", 43)), nil, 400, "invalid_grant"},
			{"public client, short verifier", f.public, with(grant(pub), "code_verifier", strings.Repeat("a", 42)), nil, 400, "invalid_request"},
			{"public client, long verifier", f.public, with(grant(pub), "code_verifier", strings.Repeat("a", 129)), nil, 400, "invalid_request"},
			{"public client, verifier with a space", f.public, with(grant(pub), "code_verifier", strings.Repeat("a", 42)+" "), nil, 400, "invalid_request"},
			{"challenge but no verifier", f.post, grant(withChallenge), nil, 400, "invalid_request"},
			{"challenge, wrong verifier", f.post, with(grant(withChallenge), "code_verifier", strings.Repeat("b", 50)), nil, 400, "invalid_grant"},
			{"verifier without challenge", f.post, with(grant(plain), "code_verifier", verifier), nil, 400, "invalid_request"},
			{"machine user", f.robot, grant(code), nil, 400, "unauthorized_client"},
			{"wrong secret (Basic)", f.basic, grant(code), tokentest.Basic(f.basic.GetClientId(), "wrong"), 401, "invalid_client"},
			{"unknown client", f.basic, grant(code), tokentest.Basic("nobody", "x"), 401, "invalid_client"},
			{"unregistered method (post for a basic client)", f.basic, with(with(grant(code), "client_id", f.basic.GetClientId()), "client_secret", f.basic.Secret),
				func(r *http.Request) { r.Header.Del("Authorization") }, 400, "invalid_client"},
			{"none for a confidential client", f.basic, with(grant(code), "client_id", f.basic.GetClientId()),
				func(r *http.Request) { r.Header.Del("Authorization") }, 400, "invalid_client"},
			{"two methods at once", f.basic, with(grant(code), "client_secret", f.basic.Secret), nil, 400, "invalid_request"},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				form, edit := f.auth(t, tc.client)
				for k, v := range tc.params {
					form[k] = v
				}
				if tc.name == "repeated parameter" {
					form["code"] = []string{code, code}
				}
				res := tokentest.Call(t, http.MethodPost, f.base+"/oauth/v2/token", form, func(r *http.Request) {
					if edit != nil {
						edit(r)
					}
					if tc.edit != nil {
						tc.edit(r)
					}
				})
				wantError(t, res, tc.status, tc.code)
				if tc.status == 401 && res.Header.Get("WWW-Authenticate") == "" {
					t.Error("401 without WWW-Authenticate")
				}
			})
		}
		// Nothing was consumed by the refused requests.
		wantTokens(t, f.exchange(t, f.basic, code))
		wantTokens(t, f.exchange(t, f.public, pub))
		wantTokens(t, f.token(t, f.post, url.Values{"grant_type": {"authorization_code"}, "code": {withChallenge},
			"redirect_uri": {redirectURI}, "code_verifier": {verifier}}))
		wantTokens(t, f.exchange(t, f.post, plain))
	})
}

// TestAuthorizationCodeExpired: a code is refused from its expiry on.
func TestAuthorizationCodeExpired(t *testing.T) {
	forDialects(t, options{}, func(t *testing.T, f *fixture) {
		code := f.code(t, login{client: f.basic})
		f.advance(t, codeTTL)
		wantError(t, f.exchange(t, f.basic, code), 400, "invalid_grant")
	})
}

// TestAuthorizationCodeClientNotAllowed: an app without the grant type.
func TestAuthorizationCodeClientNotAllowed(t *testing.T) {
	f := newFixture(t, "sqlite", options{})
	code := f.code(t, login{client: f.other})
	f.other.GrantTypes = []string{"implicit"} // changed after the code was made
	f.Auth.Cache.Refresh(context.Background(), f.other.GetClientId())
	wantError(t, f.exchange(t, f.other, code), 400, "unauthorized_client")
}

// TestAuthorizationCodeReplay: a second use fails and revokes the access
// token and the refresh token family the first use issued.
func TestAuthorizationCodeReplay(t *testing.T) {
	run := func(t *testing.T, f *fixture) {
		for _, c := range []*tokentest.Client{f.basic, f.post} { // JWT and opaque access tokens
			t.Run(c.GetClientId(), func(t *testing.T) {
				code := f.code(t, login{client: c})
				first := wantTokens(t, f.exchange(t, c, code))
				second := wantTokens(t, f.refresh(t, c, first.RefreshToken, nil))
				wantError(t, f.exchange(t, c, code), 400, "invalid_grant")
				for name, at := range map[string]string{"first": first.AccessToken, "refreshed": second.AccessToken} {
					if f.active(t, at) {
						t.Errorf("%s access token still active after the code replay", name)
					}
				}
				wantError(t, f.refresh(t, c, second.RefreshToken, nil), 400, "invalid_grant")
			})
		}
	}
	forDialects(t, options{}, run)
	t.Run("redis", func(t *testing.T) { run(t, newFixture(t, "sqlite", redisOptions(t))) })
}

// TestAuthorizationCodeConcurrent: of concurrent exchanges of one code
// exactly one succeeds; the others are replays.
func TestAuthorizationCodeConcurrent(t *testing.T) {
	forDialects(t, options{}, func(t *testing.T, f *fixture) {
		code := f.code(t, login{client: f.post})
		const n = 8
		var wg sync.WaitGroup
		statuses := make([]int, n)
		errs := make([]error, n)
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				statuses[i], _, errs[i] = postForm(http.DefaultClient, f.base+"/oauth/v2/token", url.Values{
					"grant_type": {"authorization_code"}, "code": {code}, "redirect_uri": {redirectURI},
					"client_id": {f.post.GetClientId()}, "client_secret": {f.post.Secret}}, "", "")
			}()
		}
		wg.Wait()
		ok := 0
		for i := range n {
			if errs[i] != nil {
				t.Fatal(errs[i])
			}
			switch statuses[i] {
			case 200:
				ok++
			case 400:
			default:
				t.Errorf("status %d; want 200 or 400", statuses[i])
			}
		}
		if ok != 1 {
			t.Fatalf("%d of %d concurrent exchanges succeeded; want exactly 1", ok, n)
		}
	})
}

// halfHash is at_hash as a relying party computes it.
func halfHash(v string) string {
	sum := sha256.Sum256([]byte(v))
	return base64.RawURLEncoding.EncodeToString(sum[:16])
}

func strs(v any) []string {
	var out []string
	switch x := v.(type) {
	case string:
		out = append(out, x)
	case []any:
		for _, e := range x {
			s, _ := e.(string)
			out = append(out, s)
		}
	}
	return out
}
