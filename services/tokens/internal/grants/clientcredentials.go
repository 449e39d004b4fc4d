package grants

import (
	"context"
	"errors"

	directoryv1 "github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/directory/v1"
	"github.com/gatehouse-id/gatehouse/pkg/oauth"
	"github.com/gatehouse-id/gatehouse/services/tokens/internal/clients"
	"github.com/gatehouse-id/gatehouse/services/tokens/internal/mint"
	"github.com/gatehouse-id/gatehouse/services/tokens/internal/revocation"
	"github.com/gatehouse-id/gatehouse/services/tokens/scope"
)

// clientCredentials is RFC 6749 §4.4 for machine users with a client
// secret (client_secret_basic or client_secret_post only, per the seed;
// the dispatcher's Spec).
// No ID token and no refresh token are issued.
type clientCredentials struct{ Deps }

type clientCredentialsParams struct {
	Scope string `form:"scope"`
}

func (g *clientCredentials) handle(ctx context.Context, r *Request[clientCredentialsParams]) (*mint.Response, error) {
	c := r.Client
	// The client came from a cache: a machine user deactivated within its
	// TTL would still get tokens that its cut-off does not cover. A user
	// with a cut-off on the list is read fresh from the directory.
	if until, err := g.Cuts.RevokedUntil(ctx, revocation.UserKey(c.GetId())); err != nil {
		return nil, oauth.New(oauth.TemporarilyUnavailable, "revocation check failed").WithCause(err)
	} else if !until.IsZero() {
		fresh, err := g.Auth.Cache.Refresh(ctx, c.GetClientId())
		switch {
		case errors.Is(err, clients.ErrUnknown):
			return nil, oauth.InvalidClientError(r.Creds.Basic, "client authentication failed")
		case err != nil:
			return nil, oauth.New(oauth.TemporarilyUnavailable, "the client directory is unavailable").WithCause(err)
		case !fresh.GetActive():
			return nil, oauth.InvalidClientError(r.Creds.Basic, "client authentication failed")
		}
		c = fresh
	}
	scopes, err := scope.Parse(r.Params.Scope)
	if err != nil {
		return nil, err
	}
	if err := scope.Check(scope.ForClient(c), scopes); err != nil {
		return nil, err
	}
	// No refresh token is issued here, so offline_access is not granted.
	scopes = scope.Without(scopes, scope.OfflineAccess)
	at, err := g.Minter.AccessToken(ctx, nil, mint.Access{
		ClientID: c.GetClientId(),
		Subject:  c.GetId(),
		OrgID:    c.GetOrgId(),
		Scopes:   scopes,
		Audience: scope.Audience([]string{c.GetClientId()}, scopes),
		JWT:      c.GetAccessTokenType() == directoryv1.TokenType_TOKEN_TYPE_JWT,
	})
	if err != nil {
		return nil, err
	}
	return g.Minter.NewResponse(at, scopes), nil
}
