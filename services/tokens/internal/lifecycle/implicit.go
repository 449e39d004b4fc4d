package lifecycle

import (
	"context"
	"errors"
	"slices"
	"strings"
	"time"

	"connectrpc.com/connect"

	tokensv1 "github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/tokens/v1"
	"github.com/gatehouse-id/gatehouse/services/tokens/internal/mint"
	"github.com/gatehouse-id/gatehouse/services/tokens/scope"
)

// Implicit-flow response types.
const (
	ResponseIDToken      = "id_token"
	ResponseIDTokenToken = "id_token token"
)

// CreateImplicitTokens implements TokenService.CreateImplicitTokens (OIDC
// Core §3.2.2.5, see the proto for its contract). No refresh token is
// issued in the implicit flow, so offline_access is dropped.
func (l *Lifecycle) CreateImplicitTokens(ctx context.Context, req *tokensv1.CreateImplicitTokensRequest) (*tokensv1.CreateImplicitTokensResponse, error) {
	m := req
	rt := m.GetResponseType()
	if rt != ResponseIDToken && rt != ResponseIDTokenToken {
		return nil, invalidArgument("response_type must be %q or %q", ResponseIDToken, ResponseIDTokenToken)
	}
	if m.GetNonce() == "" {
		return nil, invalidArgument("nonce is required in the implicit flow") // OIDC Core §3.2.2.1
	}
	c, err := l.rpcClient(ctx, m.GetClientId(), GrantImplicit)
	if err != nil {
		return nil, err
	}
	if !slices.Contains(c.GetResponseTypes(), rt) {
		return nil, failedPrecondition("the client may not use response_type %q", rt)
	}
	lg, err := rpcLogin(c, m.GetUserId(), m.GetOrgId(), m.GetScopes(), m.GetNonce(), m.GetSessionId(), m.GetAuthTime(), m.GetAmr())
	if err != nil {
		return nil, err
	}
	lg.scopes = scope.Without(lg.scopes, scope.OfflineAccess)
	withAccess := rt == ResponseIDTokenToken
	// Without an access token the claims can only travel in the ID token
	// (OIDC Core §5.4); with one, only when the client asks for it.
	var claims map[string]any
	if !withAccess || c.GetIdTokenUserinfoAssertion() {
		claims, err = l.userClaims(ctx, lg.subject, lg.scopes)
		if errors.Is(err, errUserGone) {
			return nil, connect.NewError(connect.CodeNotFound, errors.New("the user no longer exists or is deactivated"))
		}
		if err != nil {
			return nil, l.unavailable(ctx, err)
		}
	}
	if lg.sessionID != "" {
		// Before any token exists, durably: the session's logout reaches
		// the app (back-channel logout).
		if err := l.Store.RecordSessionClient(ctx, nil, lg.sessionID, c.GetClientId(), lg.subject, l.Now()); err != nil {
			return nil, l.unavailable(ctx, err)
		}
	}
	out := &tokensv1.CreateImplicitTokensResponse{TokenType: "Bearer", Scope: strings.Join(lg.scopes, " ")}
	var at *mint.Issued
	if withAccess {
		if at, err = l.accessToken(ctx, nil, lg, ""); err != nil {
			return nil, l.unavailable(ctx, err)
		}
		out.AccessToken = at.Token
		out.ExpiresIn = int64(at.ExpiresAt.Sub(l.Minter.Now()).Round(time.Second).Seconds())
	}
	if out.IdToken, err = l.idToken(lg, audience(c, lg.scopes), out.AccessToken, claims); err != nil {
		return nil, l.unavailable(ctx, err)
	}
	return out, nil
}
