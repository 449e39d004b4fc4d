package grants

import (
	"context"
	"errors"
	"slices"

	"connectrpc.com/connect"

	directoryv1 "github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/directory/v1"
	"github.com/gatehouse-id/gatehouse/pkg/oauth"
	"github.com/gatehouse-id/gatehouse/services/tokens/internal/assertion"
	"github.com/gatehouse-id/gatehouse/services/tokens/internal/mint"
	"github.com/gatehouse-id/gatehouse/services/tokens/internal/revocation"
	"github.com/gatehouse-id/gatehouse/services/tokens/scope"
)

// jwtBearer is the JWT profile grant (RFC 7523 §2.1): a machine user signs
// an assertion with one of its keys (iss = sub = its user id, aud = the
// issuer) and gets an access token, and an ID token when openid is asked.
// The assertion is the caller's authentication (Spec.SelfAuthenticated):
// client credentials sent beside it are not looked at.
type jwtBearer struct{ Deps }

type jwtBearerParams struct {
	Assertion string `form:"assertion,required"`
	Scope     string `form:"scope"`
}

func (g *jwtBearer) handle(ctx context.Context, r *Request[jwtBearerParams]) (*mint.Response, error) {
	raw := r.Params.Assertion
	scopes, err := scope.Parse(r.Params.Scope)
	if err != nil {
		return nil, err
	}
	kid, err := assertion.KeyID(raw)
	if err != nil {
		return nil, oauth.New(oauth.InvalidGrant, "malformed assertion").WithCause(err)
	}
	res, err := g.Dir.GetMachineKey(ctx, &directoryv1.GetMachineKeyRequest{KeyId: kid})
	if connect.CodeOf(err) == connect.CodeNotFound {
		return nil, oauth.New(oauth.InvalidGrant, "assertion signed by an unknown key")
	}
	if err != nil {
		return nil, oauth.New(oauth.TemporarilyUnavailable, "key lookup failed").WithCause(err)
	}
	k, user := res.GetKey(), res.GetUser()
	key := assertion.Key{ID: k.GetKeyId(), PEM: k.GetPublicKeyPem()}
	if k.GetExpiresAt() != nil {
		t := k.GetExpiresAt().AsTime()
		key.ExpiresAt = &t
	}
	if _, err := g.Assertions.Verify(ctx, raw, key, user.GetId()); err != nil {
		if errors.Is(err, assertion.ErrInvalid) {
			return nil, oauth.New(oauth.InvalidGrant, "assertion invalid").WithCause(err)
		}
		return nil, err
	}
	if user.GetState() != directoryv1.UserState_USER_STATE_ACTIVE || !user.GetMachine() {
		return nil, oauth.New(oauth.InvalidGrant, "the assertion's user cannot get tokens")
	}
	// The key and its user may come from a cache (the directory's change
	// feed invalidates it; through an outage it is served for a bounded
	// time): a machine user deactivated since would still get tokens that
	// its cut-off does not cover, as client_credentials guards against
	// too. A user with a cut-off on the list is read fresh.
	if until, err := g.Cuts.RevokedUntil(ctx, revocation.UserKey(user.GetId())); err != nil {
		return nil, oauth.New(oauth.TemporarilyUnavailable, "revocation check failed").WithCause(err)
	} else if !until.IsZero() {
		fresh, err := g.Dir.GetUser(ctx, &directoryv1.GetUserRequest{UserId: user.GetId()})
		switch {
		case connect.CodeOf(err) == connect.CodeNotFound:
			return nil, oauth.New(oauth.InvalidGrant, "the assertion's user cannot get tokens")
		case err != nil:
			return nil, oauth.New(oauth.TemporarilyUnavailable, "the user directory is unavailable").WithCause(err)
		}
		u := fresh.GetUser()
		if u.GetState() != directoryv1.UserState_USER_STATE_ACTIVE || !u.GetMachine() || u.GetOrgId() != user.GetOrgId() {
			return nil, oauth.New(oauth.InvalidGrant, "the assertion's user cannot get tokens")
		}
		user = u
	}
	if err := scope.Check(scope.Requester{Kind: scope.MachineUser, OrgID: user.GetOrgId(), Projects: res.GetOrgProjectIds()}, scopes); err != nil {
		return nil, err
	}
	scopes = scope.Without(scopes, scope.OfflineAccess)
	at, err := g.Minter.AccessToken(ctx, nil, mint.Access{
		ClientID: user.GetId(),
		Subject:  user.GetId(),
		OrgID:    user.GetOrgId(),
		Scopes:   scopes,
		Audience: scope.Audience([]string{user.GetId()}, scopes),
		JWT:      user.GetAccessTokenType() == directoryv1.TokenType_TOKEN_TYPE_JWT,
	})
	if err != nil {
		return nil, err
	}
	out := g.Minter.NewResponse(at, scopes)
	if slices.Contains(scopes, scope.OpenID) {
		out.IDToken, err = g.Minter.IDToken(mint.ID{
			Subject:     user.GetId(),
			ClientID:    user.GetId(),
			Audience:    scope.Audience([]string{user.GetId()}, scopes),
			AuthTime:    g.Minter.Now(),
			AMR:         []string{"swk"},
			AccessToken: at.Token,
		})
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}
