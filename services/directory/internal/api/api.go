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
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	managementv1 "github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/management/v1"
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
	public, err := publicFiles(managementv1.File_gatehouse_management_v1_management_proto)
	if err != nil {
		return nil, err
	}
	reflector := grpcreflect.NewReflector(
		grpcreflect.NamerFunc(func() []string { return []string{managementv1connect.ManagementServiceName} }),
		grpcreflect.WithDescriptorResolver(public))
	bound := connect.WithReadMaxBytes(restapi.MaxMessageBytes)
	mux.Handle(grpcreflect.NewHandlerV1(reflector, bound))
	mux.Handle(grpcreflect.NewHandlerV1Alpha(reflector, bound))
	mux.Handle("/", tc)
	return mux, nil
}

// publicFiles holds fd and its transitive imports only, so reflection
// describes the public API and nothing else linked into the process.
func publicFiles(fd protoreflect.FileDescriptor) (*protoregistry.Files, error) {
	files := new(protoregistry.Files)
	var add func(protoreflect.FileDescriptor) error
	add = func(f protoreflect.FileDescriptor) error {
		if _, err := files.FindFileByPath(f.Path()); err == nil {
			return nil
		}
		imports := f.Imports()
		for i := 0; i < imports.Len(); i++ {
			if err := add(imports.Get(i).FileDescriptor); err != nil {
				return err
			}
		}
		return files.RegisterFile(f)
	}
	return files, add(fd)
}
