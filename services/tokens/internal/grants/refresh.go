package grants

import (
	"context"
	"slices"

	directoryv1 "github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/directory/v1"
	"github.com/gatehouse-id/gatehouse/pkg/oauth"
	"github.com/gatehouse-id/gatehouse/pkg/scope"
	"github.com/gatehouse-id/gatehouse/services/tokens/internal/clients"
	"github.com/gatehouse-id/gatehouse/services/tokens/internal/lifecycle"
	"github.com/gatehouse-id/gatehouse/services/tokens/internal/mint"
)

// refreshToken is the refresh_token grant (RFC 6749 §6, OIDC Core §12)
// with all four client authentication methods (none sends only
// client_id). refresh_token is required (invalid_request); scope is
// optional, parsed like every scope (invalid_scope for an unknown one).
// Only an active OIDC app registered for the grant may use it
// (unauthorized_client). Rotation, reuse detection, expiry and scope
// narrowing are lifecycle.Refresh's.
type refreshToken struct{ Deps }

func (g *refreshToken) Handle(ctx context.Context, r *Request) (*mint.Response, error) {
	auth, err := g.Auth.Authenticate(ctx, r.Creds, clients.SecretBasic, clients.SecretPost, clients.None, clients.PrivateKeyJWT)
	if err != nil {
		return nil, err
	}
	c := auth.Client
	if c.GetKind() != directoryv1.ClientKind_CLIENT_KIND_OIDC_APP || !slices.Contains(c.GetGrantTypes(), lifecycle.GrantRefreshToken) {
		return nil, oauth.New(oauth.UnauthorizedClient, "the client may not use the refresh_token grant")
	}
	raw := r.Get("refresh_token")
	if raw == "" {
		return nil, oauth.New(oauth.InvalidRequest, "refresh_token is required")
	}
	requested, err := scope.Parse(r.Get("scope"))
	if err != nil {
		return nil, err
	}
	return g.Lifecycle.Refresh(ctx, c, raw, requested)
}
