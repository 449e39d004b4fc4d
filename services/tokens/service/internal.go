package service

import (
	"context"

	"connectrpc.com/connect"

	tokensv1 "github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/tokens/v1"
	"github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/tokens/v1/tokensv1connect"
	"github.com/gatehouse-id/gatehouse/services/tokens/internal/introspection"
	"github.com/gatehouse-id/gatehouse/services/tokens/internal/lifecycle"
)

// internalAPI is the internal TokenService: introspection for directory,
// and for authn the login's tokens (codes, implicit tokens, id_token_hint,
// session revocation).
type internalAPI struct {
	tokensv1connect.UnimplementedTokenServiceHandler
	validator *introspection.Validator
	life      *lifecycle.Lifecycle
}

var _ tokensv1connect.TokenServiceHandler = (*internalAPI)(nil)

func (a *internalAPI) Introspect(ctx context.Context, req *connect.Request[tokensv1.IntrospectRequest]) (*connect.Response[tokensv1.IntrospectResponse], error) {
	return a.validator.Introspect(ctx, req)
}

func (a *internalAPI) CreateAuthorizationCode(ctx context.Context, req *connect.Request[tokensv1.CreateAuthorizationCodeRequest]) (*connect.Response[tokensv1.CreateAuthorizationCodeResponse], error) {
	return a.life.CreateAuthorizationCode(ctx, req)
}

func (a *internalAPI) CreateImplicitTokens(ctx context.Context, req *connect.Request[tokensv1.CreateImplicitTokensRequest]) (*connect.Response[tokensv1.CreateImplicitTokensResponse], error) {
	return a.life.CreateImplicitTokens(ctx, req)
}

func (a *internalAPI) VerifyIDTokenHint(ctx context.Context, req *connect.Request[tokensv1.VerifyIDTokenHintRequest]) (*connect.Response[tokensv1.VerifyIDTokenHintResponse], error) {
	return a.life.VerifyIDTokenHint(ctx, req)
}

func (a *internalAPI) RevokeSession(ctx context.Context, req *connect.Request[tokensv1.RevokeSessionRequest]) (*connect.Response[tokensv1.RevokeSessionResponse], error) {
	return a.life.RevokeSession(ctx, req)
}

func (a *internalAPI) RevokeUserTokens(ctx context.Context, req *connect.Request[tokensv1.RevokeUserTokensRequest]) (*connect.Response[tokensv1.RevokeUserTokensResponse], error) {
	return a.life.RevokeUserTokens(ctx, req)
}
