package lifecycle_test

import (
	"context"
	"errors"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/gatehouse-id/gatehouse/pkg/db"
	directoryv1 "github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/directory/v1"
	tokensv1 "github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/tokens/v1"
	"github.com/gatehouse-id/gatehouse/pkg/testutil/dbtest"
	"github.com/gatehouse-id/gatehouse/services/tokens/internal/introspection/tokentest"
	"github.com/gatehouse-id/gatehouse/services/tokens/internal/lifecycle"
)

const redirect = "https://rp.example.test/cb"

// directory adds GetUser (unused here: users and apps share one
// organization) to tokentest's.
type directory struct{ *tokentest.Directory }

func (directory) GetUser(context.Context, *directoryv1.GetUserRequest) (*directoryv1.GetUserResponse, error) {
	return nil, connect.NewError(connect.CodeUnimplemented, errors.New("not in this test"))
}

type kicks struct{ n atomic.Int32 }

func (k *kicks) Kick() { k.n.Add(1) }

// logins signs alice in to apps of every kind that receives tokens of a
// browser session, on env's real token stack.
type logins struct {
	t    *testing.T
	env  *tokentest.Env
	life *lifecycle.Lifecycle
}

func newLogins(t *testing.T, d db.Dialect, k lifecycle.Logouts) *logins {
	t.Helper()
	env := tokentest.New(t, d, tokentest.Options{})
	env.Dir.PutUser(tokentest.Alice())
	life := &lifecycle.Lifecycle{Issuer: tokentest.Issuer, Store: env.Store, Minter: env.Minter, Hasher: env.Hasher,
		Revoked: env.Revoked, Keys: env.Keys, Dir: directory{env.Dir}, Clients: env.Auth.Cache,
		CodeTTL: time.Minute, RefreshIdle: time.Hour, RefreshAbs: 3 * time.Hour, Logouts: k, Now: env.Clock.Now, Logger: tokentest.Quiet}
	return &logins{t: t, env: env, life: life}
}

// app registers an OIDC app allowed grant.
func (g *logins) app(clientID, grant string, responseTypes ...string) *directoryv1.Client {
	c := g.env.AddClient(g.t, clientID, "project-1", directoryv1.ClientKind_CLIENT_KIND_OIDC_APP,
		directoryv1.AuthMethod_AUTH_METHOD_CLIENT_SECRET_BASIC).Client
	c.RedirectUris, c.GrantTypes, c.ResponseTypes = []string{redirect}, []string{grant}, responseTypes
	return c
}

func (g *logins) authTime() *timestamppb.Timestamp {
	return timestamppb.New(g.env.Clock.Now().Add(-time.Minute))
}

// code creates a code of session sid for c and, with exchange, redeems it.
func (g *logins) code(c *directoryv1.Client, sid string, exchange bool) {
	g.t.Helper()
	ctx := context.Background()
	res, err := g.life.CreateAuthorizationCode(ctx, &tokensv1.CreateAuthorizationCodeRequest{ClientId: c.GetClientId(),
		RedirectUri: redirect, UserId: "user-alice", OrgId: "org-1", Scopes: []string{"openid"}, SessionId: sid, AuthTime: g.authTime()})
	if err != nil {
		g.t.Fatal(err)
	}
	if !exchange {
		return
	}
	if _, err := g.life.ExchangeCode(ctx, c, false, res.GetCode(), redirect, ""); err != nil {
		g.t.Fatal(err)
	}
}

// implicit issues an ID token of session sid to c.
func (g *logins) implicit(c *directoryv1.Client, sid string) {
	g.t.Helper()
	if _, err := g.life.CreateImplicitTokens(context.Background(), &tokensv1.CreateImplicitTokensRequest{ClientId: c.GetClientId(),
		ResponseType: "id_token", Nonce: "n", UserId: "user-alice", OrgId: "org-1", Scopes: []string{"openid"}, SessionId: sid,
		AuthTime: g.authTime()}); err != nil {
		g.t.Fatal(err)
	}
}

// device approves a device authorization of c in session sid and redeems it.
func (g *logins) device(c *directoryv1.Client, sid string) {
	g.t.Helper()
	ctx := context.Background()
	start, err := g.life.StartDevice(ctx, c, []string{"openid"})
	if err != nil {
		g.t.Fatal(err)
	}
	d, err := g.life.GetDeviceAuthorization(ctx, &tokensv1.GetDeviceAuthorizationRequest{UserCode: start.UserCode})
	if err != nil {
		g.t.Fatal(err)
	}
	if _, err := g.life.DecideDeviceAuthorization(ctx, &tokensv1.DecideDeviceAuthorizationRequest{DeviceId: d.GetDeviceId(), Approve: true,
		UserId: "user-alice", OrgId: "org-1", SessionId: sid, AuthTime: g.authTime()}); err != nil {
		g.t.Fatal(err)
	}
	if _, err := g.life.ExchangeDeviceCode(ctx, c, start.DeviceCode); err != nil {
		g.t.Fatal(err)
	}
}

// outbox lists the queued logouts as "session/client", sorted.
func (g *logins) outbox() []string {
	g.t.Helper()
	due, _, err := g.env.Store.DueLogouts(context.Background(), g.env.Clock.Now().Add(time.Hour), 100)
	if err != nil {
		g.t.Fatal(err)
	}
	var out []string
	for _, l := range due {
		if l.UserID != "user-alice" {
			g.t.Fatalf("logout %+v; want alice's", l)
		}
		out = append(out, l.SessionID+"/"+l.ClientID)
	}
	slices.Sort(out)
	return out
}

// Ending a session queues a logout for every app that received tokens in
// it (a redeemed code, implicit tokens, a redeemed device approval), in
// the revoking transaction, and kicks the sender; an app whose code was
// never redeemed, and other sessions, are not told.
func TestRevokeSessionQueuesLogouts(t *testing.T) {
	dbtest.Run(t, func(t *testing.T, d db.Dialect) {
		k := &kicks{}
		g := newLogins(t, d, k)
		web := g.app("web", "authorization_code", "code")
		spa := g.app("spa", "implicit", "id_token")
		tv := g.app("tv", lifecycle.GrantDeviceCode)
		abandoned := g.app("abandoned", "authorization_code", "code")
		g.code(web, "s1", true)
		g.code(web, "s1", true) // a second sign-in of the session: one logout
		g.implicit(spa, "s1")
		g.device(tv, "s1")
		g.code(abandoned, "s1", false)
		g.code(web, "s2", true)
		if got := g.outbox(); len(got) != 0 {
			t.Fatalf("queued before any logout: %v", got)
		}
		ctx := context.Background()
		if _, err := g.life.RevokeSession(ctx, &tokensv1.RevokeSessionRequest{SessionId: "s1"}); err != nil {
			t.Fatal(err)
		}
		if got, want := g.outbox(), []string{"s1/spa", "s1/tv", "s1/web"}; !slices.Equal(got, want) {
			t.Fatalf("queued %v; want %v", got, want)
		}
		if n := k.n.Load(); n != 1 {
			t.Fatalf("%d kicks; want 1", n)
		}
		// Logged out again (authn retried): nothing more, no kick.
		if _, err := g.life.RevokeSession(ctx, &tokensv1.RevokeSessionRequest{SessionId: "s1"}); err != nil {
			t.Fatal(err)
		}
		if got := g.outbox(); len(got) != 3 || k.n.Load() != 1 {
			t.Fatalf("after a repeated logout: %v, %d kicks; want unchanged", got, k.n.Load())
		}
	})
}

// A user's cut-off queues the logouts of the sessions whose apps received
// tokens up to it, and not of a session begun after it.
func TestRevokeUserTokensQueuesLogouts(t *testing.T) {
	dbtest.Run(t, func(t *testing.T, d db.Dialect) {
		k := &kicks{}
		g := newLogins(t, d, k)
		web := g.app("web", "authorization_code", "code")
		spa := g.app("spa", "implicit", "id_token")
		g.code(web, "before", true)
		g.implicit(spa, "before")
		cut := g.env.Clock.Now()
		g.env.Clock.Advance(time.Second)
		g.code(web, "after", true)
		req := &tokensv1.RevokeUserTokensRequest{UserId: "user-alice", NotAfter: timestamppb.New(cut)}
		if _, err := g.life.RevokeUserTokens(context.Background(), req); err != nil {
			t.Fatal(err)
		}
		if got, want := g.outbox(), []string{"before/spa", "before/web"}; !slices.Equal(got, want) || k.n.Load() != 1 {
			t.Fatalf("queued %v, %d kicks; want %v and one kick", got, k.n.Load(), want)
		}
		req.NotAfter = timestamppb.New(g.env.Clock.Now())
		if _, err := g.life.RevokeUserTokens(context.Background(), req); err != nil {
			t.Fatal(err)
		}
		if got := g.outbox(); len(got) != 3 || k.n.Load() != 2 {
			t.Fatalf("after a later cut-off: %v, %d kicks; want the new session queued too", got, k.n.Load())
		}
	})
}
