package rpc_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/gatehouse-id/gatehouse/pkg/rpc"
)

// A hung service (accepting, never answering) fails a call within the
// caller's deadline, as DeadlineExceeded, which the caches treat like a
// refused connection (dircache.Unavailable); a hashing procedure gets the
// longer one; a caller's own sooner deadline wins.
func TestCallDeadline(t *testing.T) {
	t.Parallel()
	hung := make(chan struct{})
	t.Cleanup(func() { close(hung) })
	mux := http.NewServeMux()
	// Like a frozen process: no answer, whatever the call's deadline.
	hang := func(context.Context, *connect.Request[wrapperspb.StringValue]) (*connect.Response[wrapperspb.StringValue], error) {
		<-hung
		return nil, connect.NewError(connect.CodeUnavailable, nil)
	}
	const hashing = "/gatehouse.directory.v1.DirectoryService/VerifyPassword"
	mux.Handle(procedure, connect.NewUnaryHandler(procedure, hang))
	mux.Handle(hashing, connect.NewUnaryHandler(hashing, hang))
	base := serveH2C(t, mux)
	const def, slow = 100 * time.Millisecond, 400 * time.Millisecond
	opt := connect.WithInterceptors(rpc.NewCallDeadline(def, slow))
	for _, tc := range []struct {
		name, proc string
		ctx        func() (context.Context, context.CancelFunc)
		min, max   time.Duration
	}{
		{"default", procedure, func() (context.Context, context.CancelFunc) { return context.WithCancel(context.Background()) }, def, slow},
		{"hashing", hashing, func() (context.Context, context.CancelFunc) { return context.WithCancel(context.Background()) }, slow, 10 * slow},
		{"caller's sooner deadline", hashing, func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(context.Background(), def/2)
		}, def / 2, slow},
	} {
		c := connect.NewClient[wrapperspb.StringValue, wrapperspb.StringValue](rpc.NewHTTPClient(), base+tc.proc, opt)
		ctx, cancel := tc.ctx()
		start := time.Now()
		_, err := c.CallUnary(ctx, connect.NewRequest(wrapperspb.String("x")))
		took := time.Since(start)
		cancel()
		if connect.CodeOf(err) != connect.CodeDeadlineExceeded || took < tc.min || took >= tc.max {
			t.Errorf("%s: %v after %v; want DeadlineExceeded after %v to %v", tc.name, err, took, tc.min, tc.max)
		}
	}
}
