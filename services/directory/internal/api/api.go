// Package api serves the public management API on one handler: Connect,
// gRPC and gRPC-web from connect-go, REST (JSON) transcoded by vanguard from
// the google.api.http annotations (pkg/restapi: unknown fields ignored,
// unknown enum names and malformed bodies 400), and gRPC server reflection
// for the public service only.
package api

import (
	"log/slog"
	"net/http"

	"connectrpc.com/connect"
	"connectrpc.com/grpcreflect"

	"github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/management/v1/managementv1connect"
	"github.com/gatehouse-id/gatehouse/pkg/restapi"
)

// NewHandler serves svc; interceptors run after error normalisation, in the
// order given (typically tracing, then authorization).
func NewHandler(svc managementv1connect.ManagementServiceHandler, logger *slog.Logger, interceptors ...connect.Interceptor) (http.Handler, error) {
	path, h := managementv1connect.NewManagementServiceHandler(svc, restapi.HandlerOptions(logger, interceptors...)...)
	tc, err := restapi.Transcoder(path, h)
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	reflector := grpcreflect.NewStaticReflector(managementv1connect.ManagementServiceName)
	mux.Handle(grpcreflect.NewHandlerV1(reflector))
	mux.Handle(grpcreflect.NewHandlerV1Alpha(reflector))
	mux.Handle("/", tc)
	return mux, nil
}
