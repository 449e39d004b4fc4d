package admin

import (
	"context"
	"strings"

	"connectrpc.com/connect"
)

// authInterceptor requires a Bearer token and an Authorizer's consent for
// every call.
type authInterceptor struct{ authz Authorizer }

func (a authInterceptor) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		if req.Spec().IsClient {
			return next(ctx, req)
		}
		token, ok := bearer(req.Header().Get("Authorization"))
		if !ok {
			return nil, newError(connect.CodeUnauthenticated, "ADMIN-no-token", "a Bearer access token is required")
		}
		if err := a.authz.IAMOwner(ctx, token); err != nil {
			return nil, err
		}
		return next(ctx, req)
	}
}

func (a authInterceptor) WrapStreamingClient(n connect.StreamingClientFunc) connect.StreamingClientFunc {
	return n
}

// WrapStreamingHandler refuses streams: the service has none.
func (a authInterceptor) WrapStreamingHandler(connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return func(context.Context, connect.StreamingHandlerConn) error {
		return newError(connect.CodePermissionDenied, "ADMIN-no-permission", "procedure not allowed")
	}
}

// bearer extracts the token of an RFC 6750 §2.1 Authorization header; the
// scheme is case-insensitive.
func bearer(header string) (string, bool) {
	scheme, token, ok := strings.Cut(strings.TrimSpace(header), " ")
	token = strings.TrimSpace(token)
	if !ok || !strings.EqualFold(scheme, "Bearer") || token == "" {
		return "", false
	}
	return token, true
}
