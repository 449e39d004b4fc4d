package grants

import (
	"context"

	"github.com/gatehouse-id/gatehouse/pkg/oauth"
	"github.com/gatehouse-id/gatehouse/services/tokens/internal/clients"
	"github.com/gatehouse-id/gatehouse/services/tokens/internal/lifecycle"
	"github.com/gatehouse-id/gatehouse/services/tokens/internal/mint"
)

// authorizationCode is the authorization_code grant (RFC 6749 §4.1.3,
// OIDC Core §3.1.3) with all four client authentication methods; a client
// without a secret (none) proves itself with the PKCE code_verifier
// (RFC 7636). Parameters: code and redirect_uri are required
// (invalid_request), code_verifier must be 43-128 unreserved characters
// when sent (invalid_request). Only an active OIDC app registered for the
// grant may use it (unauthorized_client, the dispatcher's Spec). The code's checks, its single
// use and what a replay revokes are lifecycle.ExchangeCode's.
type authorizationCode struct{ Deps }

type codeParams struct {
	Code         string `form:"code,required"`
	RedirectURI  string `form:"redirect_uri,required"`
	CodeVerifier string `form:"code_verifier"`
}

func (g *authorizationCode) handle(ctx context.Context, r *Request[codeParams]) (*mint.Response, error) {
	p, public := r.Params, r.Method == clients.None
	switch {
	case p.CodeVerifier != "" && !lifecycle.ValidVerifier(p.CodeVerifier):
		return nil, oauth.New(oauth.InvalidRequest, "code_verifier must be 43 to 128 characters of A-Z, a-z, 0-9, '-', '.', '_', '~'")
	case p.CodeVerifier == "" && public:
		return nil, oauth.New(oauth.InvalidRequest, "code_verifier is required for a client without a secret")
	}
	return g.Lifecycle.ExchangeCode(ctx, r.Client, public, p.Code, p.RedirectURI, p.CodeVerifier)
}
