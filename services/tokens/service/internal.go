package service

import (
	"context"

	"connectrpc.com/connect"

	tokensv1 "github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/tokens/v1"
	"github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/tokens/v1/tokensv1connect"
	"github.com/gatehouse-id/gatehouse/services/tokens/internal/introspection"
)

// internalAPI is the internal TokenService. Introspection is implemented;
// the procedures for authn (codes, implicit tokens, id_token_hint, session
// revocation) land with the authorization code flow and answer
// Unimplemented until then.
type internalAPI struct {
	tokensv1connect.UnimplementedTokenServiceHandler
	validator *introspection.Validator
}

func (a *internalAPI) Introspect(ctx context.Context, req *connect.Request[tokensv1.IntrospectRequest]) (*connect.Response[tokensv1.IntrospectResponse], error) {
	return a.validator.Introspect(ctx, req)
}
