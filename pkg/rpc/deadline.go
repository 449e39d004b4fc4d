package rpc

import (
	"context"
	"time"

	"connectrpc.com/connect"
)

// Deadlines of internal calls. A service waiting on another must answer
// its own client (from its caches, or 503) well before edge gives up on
// it (15 s, edge's proxy.ResponseHeaderTimeout): otherwise a hung
// directory makes tokens look dead, and edge opens its breaker on a
// healthy service. A refused connection fails at once; a hung one now
// fails as fast, and callers fall back exactly as for a refused one.
const (
	InternalCallTimeout = 3 * time.Second
	// InternalHashingCallTimeout is for calls that hash a password: they
	// queue for one of the server's few hashing slots first.
	InternalHashingCallTimeout = 10 * time.Second
)

// hashingProcedures hash a password (see InternalHashingCallTimeout).
var hashingProcedures = map[string]bool{
	"/gatehouse.directory.v1.DirectoryService/VerifyPassword": true,
	"/gatehouse.directory.v1.DirectoryService/ChangePassword": true,
	"/gatehouse.directory.v1.DirectoryService/RegisterUser":   true,
}

// callDeadline gives every unary call a deadline: def, or slow for the
// hashing procedures, unless the caller's context ends sooner.
type callDeadline struct{ def, slow time.Duration }

// NewCallDeadline returns the client interceptor of the internal call
// deadlines (InternalClientOptions installs it with the constants above).
func NewCallDeadline(def, slow time.Duration) connect.Interceptor { return callDeadline{def, slow} }

func (d callDeadline) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		if !req.Spec().IsClient {
			return next(ctx, req)
		}
		limit := d.def
		if hashingProcedures[req.Spec().Procedure] {
			limit = d.slow
		}
		if dl, ok := ctx.Deadline(); !ok || time.Until(dl) > limit {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, limit)
			defer cancel()
		}
		return next(ctx, req)
	}
}

func (d callDeadline) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return next
}

func (d callDeadline) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return next
}
