package grants_test

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"

	directoryv1 "github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/directory/v1"
	"github.com/gatehouse-id/gatehouse/pkg/secrets"
	"github.com/gatehouse-id/gatehouse/services/tokens/internal/introspection/tokentest"
	"github.com/gatehouse-id/gatehouse/services/tokens/internal/kind"
	"github.com/gatehouse-id/gatehouse/services/tokens/internal/lifecycle"
)

// start exchanges a fresh code of c (scopes openid profile email
// offline_access) and returns the tokens.
func (f *fixture) start(t testing.TB, c *tokentest.Client, session string) *tokens {
	t.Helper()
	return wantTokens(t, f.exchange(t, c, f.code(t, login{client: c, session: session})))
}

// TestRefreshEachMethod rotates with each client authentication method
// (none sends only client_id): a new refresh token every time, the old one
// refused, a new ID token with the original login's auth_time and sid and
// no nonce.
func TestRefreshEachMethod(t *testing.T) {
	forDialects(t, options{}, func(t *testing.T, f *fixture) {
		for _, c := range []*tokentest.Client{f.basic, f.post, f.public, f.keyed} {
			t.Run(c.GetClientId(), func(t *testing.T) {
				first := f.start(t, c, "s-"+c.GetClientId())
				orig := f.claims(t, first.IDToken)
				f.advance(t, 5*time.Minute)
				next := wantTokens(t, f.refresh(t, c, first.RefreshToken, nil))
				if next.RefreshToken == "" || next.RefreshToken == first.RefreshToken {
					t.Fatalf("refresh token %q; want a new one", next.RefreshToken)
				}
				if next.Scope != "openid profile email offline_access" {
					t.Errorf("scope %q; want the original scopes", next.Scope)
				}
				if !f.active(t, next.AccessToken) {
					t.Error("the new access token is not active")
				}
				id := f.claims(t, next.IDToken)
				for _, k := range []string{"auth_time", "sid", "sub", "azp", "amr"} {
					if !equalJSON(id[k], orig[k]) {
						t.Errorf("refreshed id_token %s = %v; want the original %v", k, id[k], orig[k])
					}
				}
				if !equalJSON(id["aud"], orig["aud"]) {
					t.Errorf("aud %v; want the original %v", id["aud"], orig["aud"])
				}
				if _, ok := id["nonce"]; ok {
					t.Error("refreshed id_token has a nonce")
				}
				if id["iat"].(float64) <= orig["iat"].(float64) {
					t.Errorf("iat %v not after the original %v", id["iat"], orig["iat"])
				}
				if id["at_hash"] != halfHash(next.AccessToken) {
					t.Error("at_hash does not match the new access token")
				}
				third := wantTokens(t, f.refresh(t, c, next.RefreshToken, nil))
				if third.RefreshToken == next.RefreshToken {
					t.Error("refresh token not rotated")
				}
			})
		}
	})
}

// TestRefreshScope: the scope may shrink and, on a later refresh, come
// back up to the original grant; it may never grow.
func TestRefreshScope(t *testing.T) {
	forDialects(t, options{}, func(t *testing.T, f *fixture) {
		tk := f.start(t, f.post, "s")
		narrow := wantTokens(t, f.refresh(t, f.post, tk.RefreshToken, url.Values{"scope": {"openid email"}}))
		if narrow.Scope != "openid email" {
			t.Errorf("scope %q; want openid email", narrow.Scope)
		}
		at, err := f.Validator.Verify(context.Background(), narrow.AccessToken)
		if err != nil || len(at.Scopes) != 2 {
			t.Errorf("access token scopes %v (%v); want openid email", at, err)
		}
		wantError(t, f.refresh(t, f.post, narrow.RefreshToken, url.Values{"scope": {"openid phone"}}), 400, "invalid_scope")
		wantError(t, f.refresh(t, f.post, narrow.RefreshToken, url.Values{"scope": {"openid nonsense"}}), 400, "invalid_scope")
		// Refused requests changed nothing; omitting scope gives the original grant.
		back := wantTokens(t, f.refresh(t, f.post, narrow.RefreshToken, nil))
		if back.Scope != "openid profile email offline_access" {
			t.Errorf("scope %q; want the original grant", back.Scope)
		}
		// Without openid there is no ID token.
		noID := wantTokens(t, f.refresh(t, f.post, back.RefreshToken, url.Values{"scope": {"email"}}))
		if noID.IDToken != "" {
			t.Error("an ID token without openid")
		}
	})
}

// TestRefreshRefused covers the grant's other error rows; none of them
// consumes the token.
func TestRefreshRefused(t *testing.T) {
	forDialects(t, options{}, func(t *testing.T, f *fixture) {
		tk := f.start(t, f.basic, "s")
		wantError(t, f.token(t, f.basic, url.Values{"grant_type": {"refresh_token"}}), 400, "invalid_request")
		wantError(t, f.refresh(t, f.basic, "unknown", nil), 400, "invalid_grant")
		wantError(t, f.refresh(t, f.other, tk.RefreshToken, nil), 400, "invalid_grant")
		wantError(t, f.refresh(t, f.robot, tk.RefreshToken, nil), 400, "unauthorized_client")
		wantError(t, f.refresh(t, f.noRefresh, tk.RefreshToken, nil), 400, "unauthorized_client")
		res := tokentest.Call(t, http.MethodPost, f.base+"/oauth/v2/token", url.Values{"grant_type": {"refresh_token"},
			"refresh_token": {tk.RefreshToken}}, tokentest.Basic(f.basic.GetClientId(), "wrong"))
		wantError(t, res, 401, "invalid_client")
		// A public client's refresh with a secret method it is not registered for.
		pub := f.start(t, f.public, "s2")
		res = tokentest.Call(t, http.MethodPost, f.base+"/oauth/v2/token", url.Values{"grant_type": {"refresh_token"},
			"refresh_token": {pub.RefreshToken}, "client_id": {f.public.GetClientId()}, "client_secret": {"x"}}, nil)
		wantError(t, res, 400, "invalid_client")

		wantTokens(t, f.refresh(t, f.basic, tk.RefreshToken, nil))
		wantTokens(t, f.refresh(t, f.public, pub.RefreshToken, nil))
	})
}

// TestRefreshUser: the user must still exist and be active.
func TestRefreshUser(t *testing.T) {
	forDialects(t, options{}, func(t *testing.T, f *fixture) {
		tk := f.start(t, f.basic, "s")
		f.dir.setState(aliceID, directoryv1.UserState_USER_STATE_INACTIVE)
		wantError(t, f.refresh(t, f.basic, tk.RefreshToken, nil), 400, "invalid_grant")
		f.dir.setState(aliceID, directoryv1.UserState_USER_STATE_ACTIVE)
		tk = wantTokens(t, f.refresh(t, f.basic, tk.RefreshToken, nil))
		f.dir.deleteUser(aliceID)
		wantError(t, f.refresh(t, f.basic, tk.RefreshToken, nil), 400, "invalid_grant")
	})
}

// TestRefreshReuseRevokesFamily: presenting a rotated token again (no
// grace) revokes every refresh token and access token of the login.
func TestRefreshReuseRevokesFamily(t *testing.T) {
	run := func(t *testing.T, f *fixture) {
		first := f.start(t, f.basic, "s")
		second := wantTokens(t, f.refresh(t, f.basic, first.RefreshToken, nil))
		third := wantTokens(t, f.refresh(t, f.basic, second.RefreshToken, nil))
		other := f.start(t, f.basic, "s") // another login of the same user and client
		wantError(t, f.refresh(t, f.basic, first.RefreshToken, nil), 400, "invalid_grant")
		for i, at := range []string{first.AccessToken, second.AccessToken, third.AccessToken} {
			if f.active(t, at) {
				t.Errorf("access token %d still active after reuse", i+1)
			}
		}
		wantError(t, f.refresh(t, f.basic, third.RefreshToken, nil), 400, "invalid_grant")
		if !f.active(t, other.AccessToken) {
			t.Error("another login's access token was revoked")
		}
		wantTokens(t, f.refresh(t, f.basic, other.RefreshToken, nil))
	}
	forDialects(t, options{}, run)
	t.Run("redis", func(t *testing.T) { run(t, newFixture(t, "postgres", redisOptions(t))) })
}

// TestRefreshReuseGrace: within the grace period a confidential client's
// token presented again succeeds once more (a parallel refresh, a lost
// response) with a sibling refresh token, and every refresh token the
// client was given works; after the grace, reuse revokes the family.
func TestRefreshReuseGrace(t *testing.T) {
	forDialects(t, options{grace: 30 * time.Second}, func(t *testing.T, f *fixture) {
		first := f.start(t, f.post, "s")
		second := wantTokens(t, f.refresh(t, f.post, first.RefreshToken, nil))
		f.advance(t, 30*time.Second)
		sibling := wantTokens(t, f.refresh(t, f.post, first.RefreshToken, nil))
		if sibling.RefreshToken == second.RefreshToken || !f.active(t, second.AccessToken) {
			t.Fatal("a refresh within the grace did not give a sibling, or revoked the family")
		}
		// Whichever response the client kept, its refresh token works.
		third := wantTokens(t, f.refresh(t, f.post, second.RefreshToken, nil))
		wantTokens(t, f.refresh(t, f.post, sibling.RefreshToken, nil))
		f.advance(t, time.Second)
		wantError(t, f.refresh(t, f.post, first.RefreshToken, nil), 400, "invalid_grant")
		if f.active(t, third.AccessToken) {
			t.Error("reuse after the grace period did not revoke the family")
		}
		wantError(t, f.refresh(t, f.post, third.RefreshToken, nil), 400, "invalid_grant")
	})
}

// TestRefreshGraceIsBounded: one refresh token is redeemed at most
// lifecycle.MaxRedemptions times, its rotation included; one more within
// the grace is a reuse like any other: invalid_grant, and every token of
// the login is revoked.
func TestRefreshGraceIsBounded(t *testing.T) {
	forDialects(t, options{grace: time.Minute}, func(t *testing.T, f *fixture) {
		first := f.start(t, f.post, "s")
		var issued []*tokens
		for range lifecycle.MaxRedemptions {
			issued = append(issued, wantTokens(t, f.refresh(t, f.post, first.RefreshToken, nil)))
		}
		wantError(t, f.refresh(t, f.post, first.RefreshToken, nil), 400, "invalid_grant")
		for i, tk := range issued {
			if f.active(t, tk.AccessToken) {
				t.Errorf("access token of redemption %d still active after one redemption too many", i+1)
			}
			wantError(t, f.refresh(t, f.post, tk.RefreshToken, nil), 400, "invalid_grant")
		}
	})
}

// TestRefreshPublicClientHasNoGrace: nothing but the token proves a public
// client (token_endpoint_auth_method none), so its token presented again,
// even at once, is a reuse: invalid_grant, and what its first use issued is
// revoked.
func TestRefreshPublicClientHasNoGrace(t *testing.T) {
	forDialects(t, options{grace: time.Minute}, func(t *testing.T, f *fixture) {
		first := f.start(t, f.public, "s")
		second := wantTokens(t, f.refresh(t, f.public, first.RefreshToken, nil))
		wantError(t, f.refresh(t, f.public, first.RefreshToken, nil), 400, "invalid_grant")
		if f.active(t, second.AccessToken) || f.active(t, first.AccessToken) {
			t.Error("a public client's reuse within the grace left the login's access tokens active")
		}
		wantError(t, f.refresh(t, f.public, second.RefreshToken, nil), 400, "invalid_grant")
	})
}

// TestRefreshExpiry: idle expiry, and the absolute expiry of the family
// that rotation never extends.
func TestRefreshExpiry(t *testing.T) {
	forDialects(t, options{}, func(t *testing.T, f *fixture) {
		idle := f.start(t, f.basic, "s")
		f.advance(t, refreshIdle)
		wantError(t, f.refresh(t, f.basic, idle.RefreshToken, nil), 400, "invalid_grant")

		tk := f.start(t, f.basic, "s")
		for elapsed := time.Duration(0); elapsed+50*time.Minute < refreshAbs; elapsed += 50 * time.Minute {
			f.advance(t, 50*time.Minute)
			tk = wantTokens(t, f.refresh(t, f.basic, tk.RefreshToken, nil))
		}
		f.advance(t, 50*time.Minute) // past the absolute lifetime, within the idle one
		wantError(t, f.refresh(t, f.basic, tk.RefreshToken, nil), 400, "invalid_grant")
	})
}

// TestRefreshConcurrent: 20 concurrent refreshes with one token. Without
// grace, and for a public client with it, exactly one succeeds and the
// losers' reuse revokes the family. With grace a confidential client's
// succeed at most lifecycle.MaxRedemptions times (before, every one did:
// 20 live refresh tokens from one), and the ones beyond revoke the family.
func TestRefreshConcurrent(t *testing.T) {
	for _, tc := range []struct {
		name   string
		grace  time.Duration
		public bool
	}{{"grace=0s", 0, false}, {"grace=1m0s", time.Minute, false}, {"grace=1m0s/public", time.Minute, true}} {
		t.Run(tc.name, func(t *testing.T) { testRefreshConcurrent(t, tc.grace, tc.public) })
	}
}

func testRefreshConcurrent(t *testing.T, grace time.Duration, public bool) {
	forDialects(t, options{grace: grace}, func(t *testing.T, f *fixture) {
		c := f.post
		if public {
			c = f.public
		}
		tk := f.start(t, c, "s")
		form, _ := f.auth(t, c)
		form.Set("grant_type", "refresh_token")
		form.Set("refresh_token", tk.RefreshToken)
		const n = 20
		var wg sync.WaitGroup
		statuses := make([]int, n)
		bodies := make([][]byte, n)
		errs := make([]error, n)
		for i := range n {
			wg.Go(func() {
				statuses[i], bodies[i], errs[i] = postForm(http.DefaultClient, f.base+"/oauth/v2/token", form, "", "")
			})
		}
		wg.Wait()
		var winners []*tokens
		for i := range n {
			if errs[i] != nil {
				t.Fatal(errs[i])
			}
			res := &tokentest.Response{Status: statuses[i], Header: http.Header{"Cache-Control": {"no-store"}}, Body: bodies[i]}
			switch statuses[i] {
			case 200:
				winners = append(winners, wantTokens(t, res))
			default:
				wantError(t, res, 400, "invalid_grant")
			}
		}
		most := 1
		if grace > 0 && !public {
			most = lifecycle.MaxRedemptions
		}
		if len(winners) < 1 || len(winners) > most {
			t.Fatalf("%d of %d concurrent refreshes with one token succeeded; want 1 to %d", len(winners), n, most)
		}
		// More requests than redemptions: one of them was a reuse, and the
		// family is revoked, whatever the winners were given.
		for _, w := range winners {
			if f.active(t, w.AccessToken) {
				t.Error("an access token of the family is active after the reuse")
			}
			wantError(t, f.refresh(t, c, w.RefreshToken, nil), 400, "invalid_grant")
		}
	})
}

// TestRevokeRefreshToken: the revocation endpoint revokes a refresh token
// and its login's access tokens; another client's token is left alone.
func TestRevokeRefreshToken(t *testing.T) {
	forDialects(t, options{}, func(t *testing.T, f *fixture) {
		tk := f.start(t, f.public, "s")
		next := wantTokens(t, f.refresh(t, f.public, tk.RefreshToken, nil))

		// Another client: 200, nothing revoked.
		form, edit := f.auth(t, f.other)
		form.Set("token", next.RefreshToken)
		res := tokentest.Call(t, http.MethodPost, f.base+"/oauth/v2/revoke", form, edit)
		if res.Status != 200 {
			t.Fatalf("revoke as another client: %d %s; want 200", res.Status, res.Body)
		}
		if !f.active(t, next.AccessToken) {
			t.Fatal("another client revoked the token")
		}
		found, err := f.life.RevokeRefreshToken(context.Background(), next.RefreshToken, f.other.GetClientId())
		if err != nil || found {
			t.Fatalf("RevokeRefreshToken by another client: found %v err %v; want false nil", found, err)
		}

		form, edit = f.auth(t, f.public)
		form.Set("token", next.RefreshToken)
		form.Set("token_type_hint", "refresh_token")
		if res := tokentest.Call(t, http.MethodPost, f.base+"/oauth/v2/revoke", form, edit); res.Status != 200 {
			t.Fatalf("revoke: %d %s; want 200", res.Status, res.Body)
		}
		for i, at := range []string{tk.AccessToken, next.AccessToken} {
			if f.active(t, at) {
				t.Errorf("access token %d still active", i+1)
			}
		}
		wantError(t, f.refresh(t, f.public, next.RefreshToken, nil), 400, "invalid_grant")
		found, err = f.life.RevokeRefreshToken(context.Background(), next.RefreshToken, f.public.GetClientId())
		if err != nil || !found {
			t.Errorf("revoking again: found %v err %v; want true nil", found, err)
		}
		found, err = f.life.RevokeRefreshToken(context.Background(), "unknown", f.public.GetClientId())
		if err != nil || found {
			t.Errorf("unknown token: found %v err %v; want false nil", found, err)
		}
	})
}

func equalJSON(a, b any) bool {
	switch x := a.(type) {
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !equalJSON(x[i], y[i]) {
				return false
			}
		}
		return true
	default:
		return a == b
	}
}

// TestTokenEndpointFailures: a directory outage is 503
// temporarily_unavailable and consumes nothing; a storage failure is 500
// server_error without detail.
func TestTokenEndpointFailures(t *testing.T) {
	f := newFixture(t, "sqlite", options{})
	tk := f.start(t, f.basic, "s")
	f.dir.failUsers(connect.NewError(connect.CodeUnavailable, errors.New("directory down")))
	wantError(t, f.refresh(t, f.basic, tk.RefreshToken, nil), 503, "temporarily_unavailable")
	f.dir.failUsers(nil)
	tk = wantTokens(t, f.refresh(t, f.basic, tk.RefreshToken, nil))

	code := f.code(t, login{client: f.basic})
	if err := f.DB.Close(); err != nil {
		t.Fatal(err)
	}
	res := f.exchange(t, f.basic, code)
	wantError(t, res, 500, "server_error")
	if strings.Contains(string(res.Body), "database") || strings.Contains(string(res.Body), "sql") {
		t.Errorf("server_error leaks its cause: %s", res.Body)
	}
	wantError(t, f.refresh(t, f.basic, tk.RefreshToken, nil), 500, "server_error")
}

// TestRefreshTokenOfTheEarlierForm: a refresh token issued before ordered
// tokens (43 random characters, its record keyed by its plain HMAC) still
// rotates, into an ordered one.
func TestRefreshTokenOfTheEarlierForm(t *testing.T) {
	forDialects(t, options{}, func(t *testing.T, f *fixture) {
		ctx := context.Background()
		first := f.start(t, f.basic, "s-earlier")
		if kind.Of(first.RefreshToken) != kind.RefreshToken || len(first.RefreshToken) != len(kind.RefreshPrefix)+secrets.OrderedTokenLen {
			t.Fatalf("refresh token %q; want %s and an ordered token", first.RefreshToken, kind.RefreshPrefix)
		}
		// Without its prefix, or as another kind, it is nobody's.
		for _, wrong := range []string{strings.TrimPrefix(first.RefreshToken, kind.RefreshPrefix),
			kind.AccessPrefix + strings.TrimPrefix(first.RefreshToken, kind.RefreshPrefix)} {
			wantError(t, f.refresh(t, f.basic, wrong, nil), 400, "invalid_grant")
		}
		old := secrets.RandomToken(32)
		res, err := f.DB.Exec(ctx, `UPDATE refresh_tokens SET token_hash = ? WHERE token_hash = ?`,
			f.Hasher.Hash(old), f.Hasher.TokenKey(first.RefreshToken))
		if n, _ := res.RowsAffected(); err != nil || n != 1 {
			t.Fatalf("rekeying the record: %d rows, %v; want 1", n, err)
		}
		next := wantTokens(t, f.refresh(t, f.basic, old, nil))
		if kind.Of(next.RefreshToken) != kind.RefreshToken || !f.active(t, next.AccessToken) {
			t.Fatalf("refreshed: refresh token %q, access token active %v; want an ordered one and active", next.RefreshToken, f.active(t, next.AccessToken))
		}
	})
}
