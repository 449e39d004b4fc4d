package grants

import (
	"context"

	"github.com/gatehouse-id/gatehouse/services/tokens/internal/mint"
	"github.com/gatehouse-id/gatehouse/services/tokens/scope"
)

// refreshToken is the refresh_token grant (RFC 6749 §6, OIDC Core §12)
// with all four client authentication methods (none sends only
// client_id). refresh_token is required (invalid_request); scope is
// optional, parsed like every scope (invalid_scope for an unknown one).
// Only an active OIDC app registered for the grant may use it
// (unauthorized_client, the dispatcher's Spec). Rotation, reuse detection, expiry and scope
// narrowing are lifecycle.Refresh's.
type refreshToken struct{ Deps }

type refreshParams struct {
	RefreshToken string `form:"refresh_token,required"`
	Scope        string `form:"scope"`
}

func (g *refreshToken) handle(ctx context.Context, r *Request[refreshParams]) (*mint.Response, error) {
	requested, err := scope.Parse(r.Params.Scope)
	if err != nil {
		return nil, err
	}
	return g.Lifecycle.Refresh(ctx, r.Client, r.Params.RefreshToken, requested)
}
