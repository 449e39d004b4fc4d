package users_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/url"
	"testing"

	"connectrpc.com/connect"

	"github.com/gatehouse-id/gatehouse/pkg/db"
	"github.com/gatehouse-id/gatehouse/pkg/testutil/webauthntest"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/storetest"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/users"
)

const waOrigin = "http://localhost:8080"

func relyingParty(t *testing.T, issuer string) *users.WebAuthn {
	t.Helper()
	u, err := url.Parse(issuer)
	if err != nil {
		t.Fatal(err)
	}
	wa, err := users.NewWebAuthn(u, "Gatehouse")
	if err != nil {
		t.Fatal(err)
	}
	return wa
}

// register registers a factor of typ for u with a, and returns it.
func (f *linkFixture) register(t *testing.T, wa *users.WebAuthn, a *webauthntest.Authenticator, u *users.User, typ string) (*webauthntest.Credential, string) {
	t.Helper()
	ctx := context.Background()
	reg, _, err := f.cmds.StartWebAuthn(ctx, u.ID, f.reload(t, u), wa, typ)
	if err != nil {
		t.Fatal(err)
	}
	resp, cred, err := a.Create(reg.Options)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.cmds.VerifyWebAuthn(ctx, u.ID, f.reload(t, u), wa, typ, reg.ID, resp, "key"); err != nil {
		t.Fatalf("verify %s: %v", typ, err)
	}
	return cred, reg.ID
}

// login runs a login ceremony for binding: of u's factors, or a passkey
// sign-in when u is nil.
func (f *linkFixture) login(t *testing.T, wa *users.WebAuthn, a *webauthntest.Authenticator, cred *webauthntest.Credential, binding string, u *users.User) (users.WebAuthnLogin, error) {
	t.Helper()
	ctx := context.Background()
	var uid string
	if u != nil {
		u = f.reload(t, u)
		uid = u.ID
	}
	opts, err := f.cmds.BeginWebAuthnLogin(ctx, wa, binding, u)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := a.Get(opts, cred)
	if err != nil {
		t.Fatal(err)
	}
	return f.cmds.FinishWebAuthnLogin(ctx, wa, binding, uid, resp)
}

func TestWebAuthnNeedsAHostName(t *testing.T) {
	t.Parallel()
	f := newLinkFixture(t, db.SQLite)
	wa := relyingParty(t, "http://127.0.0.1:8080")
	if wa.RPID() != "" {
		t.Fatalf("RP ID %q on an IP issuer", wa.RPID())
	}
	_, _, err := f.cmds.StartWebAuthn(context.Background(), "x", f.human(t, "alice"), wa, users.FactorPasswordless)
	if connect.CodeOf(err) != connect.CodeAborted {
		t.Fatalf("start on an IP issuer: %v, want the unavailable precondition", err)
	}
	if _, err := f.cmds.BeginWebAuthnLogin(context.Background(), wa, "b", nil); connect.CodeOf(err) != connect.CodeAborted {
		t.Fatalf("login on an IP issuer: %v", err)
	}
}

func TestPasskeyRegistrationAndSignIn(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, d db.Dialect) {
		f := newLinkFixture(t, d)
		ctx := context.Background()
		wa := relyingParty(t, waOrigin)
		alice := f.human(t, "alice")
		a := &webauthntest.Authenticator{Origin: waOrigin, UV: true}

		reg, _, err := f.cmds.StartWebAuthn(ctx, alice.ID, alice, wa, users.FactorPasswordless)
		if err != nil {
			t.Fatal(err)
		}
		var opts struct {
			PublicKey struct {
				RP                     struct{ ID string }
				User                   struct{ ID string }
				AuthenticatorSelection struct {
					ResidentKey      string `json:"residentKey"`
					UserVerification string `json:"userVerification"`
				} `json:"authenticatorSelection"`
			} `json:"publicKey"`
		}
		if err := json.Unmarshal(reg.Options, &opts); err != nil {
			t.Fatal(err)
		}
		if opts.PublicKey.RP.ID != "localhost" || opts.PublicKey.AuthenticatorSelection.ResidentKey != "required" ||
			opts.PublicKey.AuthenticatorSelection.UserVerification != "required" {
			t.Fatalf("creation options %s", reg.Options)
		}
		// An answer from another origin, or without user verification, is
		// refused and changes nothing.
		for name, bad := range map[string]*webauthntest.Authenticator{
			"other origin": {Origin: "https://evil.example", UV: true},
			"no UV":        {Origin: waOrigin},
		} {
			resp, _, err := bad.Create(reg.Options)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := f.cmds.VerifyWebAuthn(ctx, alice.ID, f.reload(t, alice), wa, users.FactorPasswordless, reg.ID, resp, "k"); connect.CodeOf(err) != connect.CodeInvalidArgument {
				t.Fatalf("%s: %v, want InvalidArgument", name, err)
			}
		}
		resp, cred, err := a.Create(reg.Options)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.cmds.VerifyWebAuthn(ctx, alice.ID, f.reload(t, alice), wa, users.FactorPasswordless, reg.ID, resp, "laptop"); err != nil {
			t.Fatal(err)
		}
		// The registration is used up.
		if _, err := f.cmds.VerifyWebAuthn(ctx, alice.ID, f.reload(t, alice), wa, users.FactorPasswordless, reg.ID, resp, "again"); connect.CodeOf(err) != connect.CodeAborted {
			t.Fatalf("verify twice: %v", err)
		}
		fs, err := f.q.Factors(ctx, alice.ID)
		if err != nil || len(fs) != 1 || !fs[0].Ready() || fs[0].Name != "laptop" || fs[0].Challenge != "" {
			t.Fatalf("factors %+v, %v", fs, err)
		}

		got, err := f.login(t, wa, a, cred, "req-1", nil)
		if err != nil || got.User.ID != alice.ID || !got.UserVerified || got.Factor.Type != users.FactorPasswordless {
			t.Fatalf("passkey sign-in: %+v, %v", got, err)
		}

		// A challenge works once, whatever the outcome.
		opts2, err := f.cmds.BeginWebAuthnLogin(ctx, wa, "req-2", nil)
		if err != nil {
			t.Fatal(err)
		}
		assertion, err := a.Get(opts2, cred)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.cmds.FinishWebAuthnLogin(ctx, wa, "req-2", "", assertion); err != nil {
			t.Fatal(err)
		}
		if _, err := f.cmds.FinishWebAuthnLogin(ctx, wa, "req-2", "", assertion); !errors.Is(err, users.ErrBadCode) {
			t.Fatalf("replay: %v, want ErrBadCode", err)
		}
		// Bound to its request: another binding's ceremony refuses it.
		if _, err := f.cmds.BeginWebAuthnLogin(ctx, wa, "req-3", nil); err != nil {
			t.Fatal(err)
		}
		if _, err := f.cmds.FinishWebAuthnLogin(ctx, wa, "req-3", "", assertion); !errors.Is(err, users.ErrBadCode) {
			t.Fatalf("another request's assertion: %v", err)
		}

		// Without user verification, from another origin: refused.
		if _, err := f.login(t, wa, &webauthntest.Authenticator{Origin: waOrigin}, cred, "req-4", nil); !errors.Is(err, users.ErrBadCode) {
			t.Fatalf("passkey without UV: %v", err)
		}
		if _, err := f.login(t, wa, &webauthntest.Authenticator{Origin: "https://evil.example", UV: true}, cred, "req-5", nil); !errors.Is(err, users.ErrBadCode) {
			t.Fatalf("other origin: %v", err)
		}
		// A credential whose user handle names someone else.
		bob := f.human(t, "bob")
		forged := *cred
		forged.UserHandle = []byte(bob.ID)
		if _, err := f.login(t, wa, a, &forged, "req-6", nil); !errors.Is(err, users.ErrBadCode) {
			t.Fatalf("forged user handle: %v", err)
		}

		// The counter went back: a cloned key.
		cred.Counter = 1
		if _, err := f.login(t, wa, a, cred, "req-7", nil); !errors.Is(err, users.ErrCloned) {
			t.Fatalf("counter regression: %v, want ErrCloned", err)
		}

		// Removed: it signs in no more.
		cred.Counter = 100
		if _, err := f.cmds.RemoveWebAuthn(ctx, alice.ID, f.reload(t, alice), users.FactorPasswordless, reg.ID, false); err != nil {
			t.Fatal(err)
		}
		if _, err := f.login(t, wa, a, cred, "req-8", nil); !errors.Is(err, users.ErrBadCode) {
			t.Fatalf("removed passkey: %v", err)
		}
	})
}

func TestSecurityKeyIsASecondFactorOnly(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, d db.Dialect) {
		f := newLinkFixture(t, d)
		ctx := context.Background()
		wa := relyingParty(t, waOrigin)
		alice, bob := f.human(t, "alice"), f.human(t, "bob")
		a := &webauthntest.Authenticator{Origin: waOrigin}
		if _, err := f.cmds.BeginWebAuthnLogin(ctx, wa, "none", alice); connect.CodeOf(err) != connect.CodeAborted {
			t.Fatalf("second factor of a user without a key: %v", err)
		}
		cred, id := f.register(t, wa, a, alice, users.FactorU2F)

		got, err := f.login(t, wa, a, cred, "req-1", alice)
		if err != nil || got.User.ID != alice.ID || got.Factor.ID != id || got.Factor.Type != users.FactorU2F {
			t.Fatalf("second factor: %+v, %v", got, err)
		}
		// A ceremony begun for alice does not sign in bob, nor anyone alone.
		opts, err := f.cmds.BeginWebAuthnLogin(ctx, wa, "req-2", f.reload(t, alice))
		if err != nil {
			t.Fatal(err)
		}
		resp, err := a.Get(opts, cred)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.cmds.FinishWebAuthnLogin(ctx, wa, "req-2", bob.ID, resp); !errors.Is(err, users.ErrBadCode) {
			t.Fatalf("alice's ceremony for bob: %v", err)
		}
		// A security key is no passkey: it never signs in alone.
		if _, err := f.login(t, wa, a, cred, "req-3", nil); !errors.Is(err, users.ErrBadCode) {
			t.Fatalf("security key as a passkey: %v", err)
		}
		// Bob's second factor is not alice's key.
		bobKey, _ := f.register(t, wa, a, bob, users.FactorU2F)
		_ = bobKey
		if _, err := f.login(t, wa, a, cred, "req-4", bob); !errors.Is(err, users.ErrBadCode) {
			t.Fatalf("alice's key as bob's factor: %v", err)
		}
		// Removed by an admin: gone, and access cut.
		if _, err := f.cmds.RemoveWebAuthn(ctx, "admin", f.reload(t, alice), users.FactorU2F, id, true); err != nil {
			t.Fatal(err)
		}
		fs, err := f.q.Factors(ctx, alice.ID)
		if err != nil || len(fs) != 0 {
			t.Fatalf("factors after removal: %+v, %v", fs, err)
		}
		if _, err := f.cmds.RemoveWebAuthn(ctx, "admin", f.reload(t, alice), users.FactorU2F, id, true); connect.CodeOf(err) != connect.CodeNotFound {
			t.Fatalf("remove twice: %v", err)
		}
	})
}
