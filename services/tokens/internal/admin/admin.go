package admin

import (
	"context"
	"log/slog"
	"net/http"

	"connectrpc.com/connect"

	"github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/admin/v1/adminv1connect"
	"github.com/gatehouse-id/gatehouse/pkg/restapi"
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
	path, h := adminv1connect.NewAdminServiceHandler(&server{keys: km},
		restapi.HandlerOptions(logger, append(interceptors, authInterceptor{authz})...)...)
	tc, err := restapi.Transcoder(path, h)
	if err != nil {
		return nil, err
	}
	return tc, nil
}
