package grants_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/lestrrat-go/jwx/v3/jwa"
	"github.com/lestrrat-go/jwx/v3/jws"
	"github.com/lestrrat-go/jwx/v3/jwt"
	"google.golang.org/protobuf/types/known/timestamppb"

	directoryv1 "github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/directory/v1"
	"github.com/gatehouse-id/gatehouse/pkg/secrets"
	"github.com/gatehouse-id/gatehouse/services/tokens/internal/introspection/tokentest"
	"github.com/gatehouse-id/gatehouse/services/tokens/internal/revocation"
)

const jwtBearerGrant = "urn:ietf:params:oauth:grant-type:jwt-bearer"

// machineKey is a machine user's registered key pair.
type machineKey struct {
	kid  string
	user string
	priv *ecdsa.PrivateKey
}

// addMachineKey registers an ES256 key for a machine user of org-1 in the
// fake directory; edit may change what GetMachineKey answers.
func (f *fixture) addMachineKey(t testing.TB, userID, kid string, edit func(*directoryv1.GetMachineKeyResponse)) *machineKey {
	t.Helper()
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKIXPublicKey(&priv.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	res := &directoryv1.GetMachineKeyResponse{
		Key:           &directoryv1.PublicKey{KeyId: kid, PublicKeyPem: string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}))},
		User:          &directoryv1.User{Id: userID, OrgId: "org-1", UserName: userID, State: directoryv1.UserState_USER_STATE_ACTIVE, Machine: true},
		OrgProjectIds: []string{"proj-1"},
	}
	if edit != nil {
		edit(res)
	}
	f.dir.mu.Lock()
	f.dir.keys[kid] = res
	f.dir.mu.Unlock()
	return &machineKey{kid: kid, user: userID, priv: priv}
}

// assertion is a JWT profile assertion (RFC 7523 §2.1) of k: iss = sub =
// the user, aud the issuer, valid for a minute from the clock, a fresh
// jti; edit may change the builder.
func (f *fixture) assertion(t testing.TB, k *machineKey, edit func(b *jwt.Builder) *jwt.Builder) string {
	t.Helper()
	now := f.Clock.Now()
	b := jwt.NewBuilder().Issuer(k.user).Subject(k.user).Audience([]string{tokentest.Issuer}).
		IssuedAt(now).Expiration(now.Add(time.Minute)).JwtID(secrets.NewID())
	if edit != nil {
		b = edit(b)
	}
	tok, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	h := jws.NewHeaders()
	if err := h.Set(jws.KeyIDKey, k.kid); err != nil {
		t.Fatal(err)
	}
	raw, err := jwt.Sign(tok, jwt.WithKey(jwa.ES256(), k.priv, jws.WithProtectedHeaders(h)))
	if err != nil {
		t.Fatal(err)
	}
	return string(raw)
}

func (f *fixture) jwtBearer(t testing.TB, assertion, scope string) *tokentest.Response {
	t.Helper()
	form := url.Values{"grant_type": {jwtBearerGrant}, "assertion": {assertion}}
	if scope != "" {
		form.Set("scope", scope)
	}
	return tokentest.Call(t, http.MethodPost, f.base+"/oauth/v2/token", form, nil)
}

// TestJWTBearer: a machine user's assertion gets an access token (opaque
// or a JWT as the user is registered) whose subject and client are the
// user, an ID token only when openid is asked (amr swk), never a refresh
// token; offline_access is dropped and project scopes land in aud.
func TestJWTBearer(t *testing.T) {
	forDialects(t, options{}, func(t *testing.T, f *fixture) {
		for _, jwtType := range []bool{false, true} {
			t.Run(map[bool]string{false: "opaque", true: "jwt"}[jwtType], func(t *testing.T) {
				user := "machine-" + map[bool]string{false: "o", true: "j"}[jwtType]
				k := f.addMachineKey(t, user, "kid-"+user, func(r *directoryv1.GetMachineKeyResponse) {
					if jwtType {
						r.User.AccessTokenType = directoryv1.TokenType_TOKEN_TYPE_JWT
					}
				})
				tk := wantTokens(t, f.jwtBearer(t, f.assertion(t, k, nil), "openid offline_access urn:gatehouse:iam:org:project:id:proj-1:aud"))
				if tk.RefreshToken != "" || tk.IDToken == "" {
					t.Fatalf("response %+v; want an access and an ID token, no refresh token", tk)
				}
				if tk.Scope != "openid urn:gatehouse:iam:org:project:id:proj-1:aud" {
					t.Errorf("scope %q; want offline_access dropped", tk.Scope)
				}
				if isJWT := strings.Count(tk.AccessToken, ".") == 2; isJWT != jwtType {
					t.Errorf("access token %q: JWT %v; want %v", tk.AccessToken, isJWT, jwtType)
				}
				tok, err := f.Validator.Verify(context.Background(), tk.AccessToken)
				if err != nil {
					t.Fatalf("the access token is not active: %v", err)
				}
				if tok.Subject != user || tok.ClientID != user || !slices.Equal(tok.Audience, []string{user, "proj-1"}) {
					t.Errorf("token sub %q client_id %q aud %v; want %q, %[4]q, [%[4]q proj-1]", tok.Subject, tok.ClientID, tok.Audience, user)
				}
				id := f.claims(t, tk.IDToken)
				if id["sub"] != user || id["azp"] != user || !slices.Equal(strs(id["amr"]), []string{"swk"}) {
					t.Errorf("id_token claims %v", id)
				}
				// Without openid: no ID token.
				tk = wantTokens(t, f.jwtBearer(t, f.assertion(t, k, nil), "profile"))
				if tk.IDToken != "" {
					t.Error("an ID token without openid")
				}
			})
		}
	})
}

// TestJWTBearerRefused: every rule of the grant and of the assertion,
// each broken alone.
func TestJWTBearerRefused(t *testing.T) {
	f := newFixture(t, "sqlite", options{})
	good := f.addMachineKey(t, "machine-1", "kid-1", nil)
	expired := f.addMachineKey(t, "machine-2", "kid-2", func(r *directoryv1.GetMachineKeyResponse) {
		r.Key.ExpiresAt = timestamppb.New(f.Clock.Now().Add(-time.Second))
	})
	locked := f.addMachineKey(t, "machine-3", "kid-3", func(r *directoryv1.GetMachineKeyResponse) {
		r.User.State = directoryv1.UserState_USER_STATE_LOCKED
	})
	inactive := f.addMachineKey(t, "machine-4", "kid-4", func(r *directoryv1.GetMachineKeyResponse) {
		r.User.State = directoryv1.UserState_USER_STATE_INACTIVE
	})
	human := f.addMachineKey(t, "human-1", "kid-5", func(r *directoryv1.GetMachineKeyResponse) { r.User.Machine = false })
	other, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	forged := &machineKey{kid: good.kid, user: good.user, priv: other}
	unknownKid := &machineKey{kid: "kid-nobody", user: good.user, priv: good.priv}
	replayed := f.assertion(t, good, nil)
	wantTokens(t, f.jwtBearer(t, replayed, ""))
	now := f.Clock.Now()

	cases := []struct {
		name      string
		assertion string
		scope     string
		code      string
	}{
		{"no assertion", "", "", "invalid_request"},
		{"not a JWT", "not-a-jwt", "", "invalid_grant"},
		{"JWS JSON serialization", `{"payload":"e30","signatures":[{"protected":"eyJhbGciOiJFUzI1NiIsImtpZCI6ImtpZC0xIn0","signature":"AA"}]}`, "", "invalid_grant"},
		{"unknown kid", f.assertion(t, unknownKid, nil), "", "invalid_grant"},
		{"signed by another key", f.assertion(t, forged, nil), "", "invalid_grant"},
		{"expired key", f.assertion(t, expired, nil), "", "invalid_grant"},
		{"expired", f.assertion(t, good, func(b *jwt.Builder) *jwt.Builder {
			return b.IssuedAt(now.Add(-10 * time.Minute)).Expiration(now.Add(-2 * time.Minute))
		}), "", "invalid_grant"},
		{"iat too old", f.assertion(t, good, func(b *jwt.Builder) *jwt.Builder {
			return b.IssuedAt(now.Add(-2 * time.Hour)).Expiration(now.Add(time.Minute))
		}), "", "invalid_grant"},
		{"not yet valid", f.assertion(t, good, func(b *jwt.Builder) *jwt.Builder { return b.NotBefore(now.Add(10 * time.Minute)) }), "", "invalid_grant"},
		{"iss is another user", f.assertion(t, good, func(b *jwt.Builder) *jwt.Builder { return b.Issuer("machine-2") }), "", "invalid_grant"},
		{"sub is another user", f.assertion(t, good, func(b *jwt.Builder) *jwt.Builder { return b.Subject("machine-2") }), "", "invalid_grant"},
		{"foreign audience", f.assertion(t, good, func(b *jwt.Builder) *jwt.Builder {
			return b.Audience([]string{"https://other.example"})
		}), "", "invalid_grant"},
		{"replayed", replayed, "", "invalid_grant"},
		{"locked user", f.assertion(t, locked, nil), "", "invalid_grant"},
		{"inactive user", f.assertion(t, inactive, nil), "", "invalid_grant"},
		{"human user", f.assertion(t, human, nil), "", "invalid_grant"},
		{"unknown scope", f.assertion(t, good, nil), "openid admin", "invalid_scope"},
		{"project of another organization", f.assertion(t, good, nil), "urn:gatehouse:iam:org:project:id:elsewhere:aud", "invalid_scope"},
		{"another organization", f.assertion(t, good, nil), "urn:gatehouse:iam:org:id:org-2", "invalid_scope"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			wantError(t, f.jwtBearer(t, tc.assertion, tc.scope), 400, tc.code)
		})
	}
	// A valid assertion still works after all that.
	wantTokens(t, f.jwtBearer(t, f.assertion(t, good, nil), "urn:gatehouse:iam:org:id:org-1"))

	// The directory is down: temporarily_unavailable, with Retry-After.
	f.dir.failKeys(connect.NewError(connect.CodeUnavailable, errors.New("directory down")))
	res := f.jwtBearer(t, f.assertion(t, good, nil), "")
	wantError(t, res, 503, "temporarily_unavailable")
	if res.Header.Get("Retry-After") == "" {
		t.Error("503 without Retry-After")
	}
}

// TestJWTBearerCutOff: the machine key and its user may come from the
// client cache, stale. Once the user has a cut-off on the revocation list
// (deactivation writes one), the grant reads the user fresh: deactivated,
// removed or moved means invalid_grant; still active (a cut-off without
// deactivation) means a token issued after the cut, which stays active;
// a directory outage then is temporarily_unavailable.
func TestJWTBearerCutOff(t *testing.T) {
	forDialects(t, options{}, func(t *testing.T, f *fixture) {
		ctx := context.Background()
		k := f.addMachineKey(t, "machine-1", "kid-1", nil) // GetMachineKey keeps saying active: a stale cache
		user := &directoryv1.User{Id: k.user, OrgId: "org-1", State: directoryv1.UserState_USER_STATE_ACTIVE, Machine: true}
		f.dir.putUser(user)
		before := wantTokens(t, f.jwtBearer(t, f.assertion(t, k, nil), ""))
		if err := f.Revoked.Revoke(ctx, revocation.UserKey(k.user), revocation.UserUntil(f.Clock.Now(), f.Minter.AccessTTL)); err != nil {
			t.Fatal(err)
		}
		f.advance(t, time.Second)

		after := wantTokens(t, f.jwtBearer(t, f.assertion(t, k, nil), ""))
		if !f.active(t, after.AccessToken) || f.active(t, before.AccessToken) {
			t.Error("want the token from after the cut-off active and the one from before inactive")
		}

		f.dir.failUsers(connect.NewError(connect.CodeUnavailable, errors.New("directory down")))
		wantError(t, f.jwtBearer(t, f.assertion(t, k, nil), ""), 503, "temporarily_unavailable")
		f.dir.failUsers(nil)

		for name, change := range map[string]func(){
			"deactivated": func() { f.dir.setState(k.user, directoryv1.UserState_USER_STATE_INACTIVE) },
			"locked":      func() { f.dir.setState(k.user, directoryv1.UserState_USER_STATE_LOCKED) },
			"removed":     func() { f.dir.deleteUser(k.user) },
		} {
			f.dir.putUser(user)
			change()
			if res := f.jwtBearer(t, f.assertion(t, k, nil), ""); res.Status != 400 || res.Error() != "invalid_grant" {
				t.Errorf("%s after the cut-off: got %d %s; want 400 invalid_grant", name, res.Status, res.Body)
			}
		}
	})
}
