package admin

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"

	"connectrpc.com/connect"
	"connectrpc.com/vanguard"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/admin/v1/adminv1connect"
	"github.com/gatehouse-id/gatehouse/services/tokens/internal/keys"
)

// Paths are the prefixes the handler serves: REST and the RPC procedures.
// Mount the handler on each.
var Paths = []string{"/admin/v1/", "/" + adminv1connect.AdminServiceName + "/"}

// Authorizer decides whether the bearer token of a call belongs to an
// IAM_OWNER. It returns nil to allow the call, or a connect error:
// Unauthenticated for a missing, invalid, expired or revoked token or one
// not issued for the management API; PermissionDenied when the subject
// lacks IAM_OWNER; Unavailable when it cannot tell now. Other errors
// become Internal.
type Authorizer interface {
	IAMOwner(ctx context.Context, bearerToken string) error
}

// KeyManager is what the admin API does with the signing keys;
// keys.Manager implements it.
type KeyManager interface {
	Rotate(ctx context.Context, alg string) (keys.KeyInfo, error)
	List(ctx context.Context) ([]keys.KeyInfo, error)
}

var _ KeyManager = (*keys.Manager)(nil)

// NewHandler serves the AdminService with km, authorizing every call with
// authz. interceptors (e.g. tracing) run after error normalisation and
// before authorization.
func NewHandler(km KeyManager, authz Authorizer, logger *slog.Logger, interceptors ...connect.Interceptor) (http.Handler, error) {
	if logger == nil {
		logger = slog.Default()
	}
	all := append([]connect.Interceptor{errorInterceptor{logger}}, interceptors...)
	all = append(all, authInterceptor{authz})
	path, h := adminv1connect.NewAdminServiceHandler(&server{keys: km}, connect.WithInterceptors(all...))
	tc, err := vanguard.NewTranscoder([]*vanguard.Service{vanguard.NewService(path, h)},
		vanguard.WithCodec(func(r vanguard.TypeResolver) vanguard.Codec { return strictJSON{vanguard.NewJSONCodec(r)} }))
	if err != nil {
		return nil, fmt.Errorf("admin transcoder: %w", err)
	}
	return tc, nil
}

// strictJSON is vanguard's JSON codec with decoding errors reported as
// InvalidArgument (400) instead of Unknown (500). (Vanguard keeps the code
// and message of the error but not its details.)
type strictJSON struct{ *vanguard.JSONCodec }

func malformed(err error) error {
	return newError(connect.CodeInvalidArgument, "ADMIN-malformed-body", fmt.Sprintf("malformed JSON body: %v", err))
}

func (c strictJSON) Unmarshal(b []byte, m proto.Message) error {
	if err := c.JSONCodec.Unmarshal(b, m); err != nil {
		return malformed(err)
	}
	return nil
}

func (c strictJSON) UnmarshalField(b []byte, m proto.Message, f protoreflect.FieldDescriptor) error {
	if err := c.JSONCodec.UnmarshalField(b, m, f); err != nil {
		return malformed(err)
	}
	return nil
}

// errorInterceptor keeps connect errors, turns cancellation into its code,
// and logs anything else, which the client sees only as Internal.
type errorInterceptor struct{ logger *slog.Logger }

func (e errorInterceptor) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		res, err := next(ctx, req)
		if err == nil || req.Spec().IsClient {
			return res, err
		}
		var ce *connect.Error
		switch {
		case errors.As(err, &ce):
			return nil, ce
		case errors.Is(err, context.Canceled):
			return nil, connect.NewError(connect.CodeCanceled, err)
		case errors.Is(err, context.DeadlineExceeded):
			return nil, connect.NewError(connect.CodeDeadlineExceeded, err)
		}
		e.logger.ErrorContext(ctx, "admin call failed", "procedure", req.Spec().Procedure, "err", err)
		return nil, connect.NewError(connect.CodeInternal, errors.New("internal error"))
	}
}

func (e errorInterceptor) WrapStreamingClient(n connect.StreamingClientFunc) connect.StreamingClientFunc {
	return n
}

func (e errorInterceptor) WrapStreamingHandler(n connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return n
}
