package grants

import (
	"context"
	"slices"

	directoryv1 "github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/directory/v1"
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
// grant may use it (unauthorized_client). The code's checks, its single
// use and what a replay revokes are lifecycle.ExchangeCode's.
type authorizationCode struct{ Deps }

func (g *authorizationCode) Handle(ctx context.Context, r *Request) (*mint.Response, error) {
	auth, err := g.Auth.Authenticate(ctx, r.Creds, clients.SecretBasic, clients.SecretPost, clients.None, clients.PrivateKeyJWT)
	if err != nil {
		return nil, err
	}
	c := auth.Client
	if c.GetKind() != directoryv1.ClientKind_CLIENT_KIND_OIDC_APP || !slices.Contains(c.GetGrantTypes(), lifecycle.GrantAuthorizationCode) {
		return nil, oauth.New(oauth.UnauthorizedClient, "the client may not use the authorization_code grant")
	}
	code, redirectURI, verifier := r.Get("code"), r.Get("redirect_uri"), r.Get("code_verifier")
	switch {
	case code == "":
		return nil, oauth.New(oauth.InvalidRequest, "code is required")
	case redirectURI == "":
		return nil, oauth.New(oauth.InvalidRequest, "redirect_uri is required")
	case verifier != "" && !lifecycle.ValidVerifier(verifier):
		return nil, oauth.New(oauth.InvalidRequest, "code_verifier must be 43 to 128 characters of A-Z, a-z, 0-9, '-', '.', '_', '~'")
	case verifier == "" && auth.Method == clients.None:
		return nil, oauth.New(oauth.InvalidRequest, "code_verifier is required for a client without a secret")
	}
	return g.Lifecycle.ExchangeCode(ctx, c, auth.Method == clients.None, code, redirectURI, verifier)
}
