package rpc

import (
	"context"
	"crypto/subtle"
	"errors"
	"strings"

	"connectrpc.com/connect"
)

// InternalTokenHeader carries the internal-call credential. It is distinct
// from Authorization so an internal call can never be confused with a user's
// bearer token, and edge strips it from public requests.
const InternalTokenHeader = "Gatehouse-Internal-Token"

var errMissingCredential = errors.New("internal credential required")

// InternalAuth is the interceptor pair for the internal-call credential: on a
// client it attaches the token, on a handler it refuses calls without it.
type InternalAuth struct {
	token []byte
}

// NewInternalAuth returns the interceptor for token. An empty token makes the
// handler side refuse every call.
func NewInternalAuth(token string) *InternalAuth {
	return &InternalAuth{token: []byte(token)}
}

var _ connect.Interceptor = (*InternalAuth)(nil)

func (a *InternalAuth) valid(h interface{ Get(string) string }) bool {
	got := strings.TrimSpace(h.Get(InternalTokenHeader))
	if len(a.token) == 0 || got == "" {
		return false
	}
	return subtle.ConstantTimeCompare([]byte(got), a.token) == 1
}

// WrapUnary implements connect.Interceptor.
func (a *InternalAuth) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		if req.Spec().IsClient {
			req.Header().Set(InternalTokenHeader, string(a.token))
			return next(ctx, req)
		}
		if !a.valid(req.Header()) {
			return nil, connect.NewError(connect.CodeUnauthenticated, errMissingCredential)
		}
		return next(ctx, req)
	}
}

// WrapStreamingClient implements connect.Interceptor.
func (a *InternalAuth) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return func(ctx context.Context, spec connect.Spec) connect.StreamingClientConn {
		conn := next(ctx, spec)
		conn.RequestHeader().Set(InternalTokenHeader, string(a.token))
		return conn
	}
}

// WrapStreamingHandler implements connect.Interceptor.
func (a *InternalAuth) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return func(ctx context.Context, conn connect.StreamingHandlerConn) error {
		if !a.valid(conn.RequestHeader()) {
			return connect.NewError(connect.CodeUnauthenticated, errMissingCredential)
		}
		return next(ctx, conn)
	}
}
