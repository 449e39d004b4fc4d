// Package api serves the public management API on one handler: Connect,
// gRPC and gRPC-web from connect-go, REST (JSON) transcoded by vanguard from
// the google.api.http annotations, and gRPC server reflection for the public
// service only. A malformed JSON body is InvalidArgument (400), not
// vanguard's default Unknown (500); unknown JSON fields are ignored; any
// error that is not already a connect error is logged and becomes Internal
// without its detail.
package api

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"

	"connectrpc.com/connect"
	"connectrpc.com/grpcreflect"
	"connectrpc.com/vanguard"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/management/v1/managementv1connect"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/apierr"
)

// NewHandler serves svc; interceptors run after error normalisation, in the
// order given (typically tracing, then authorization).
func NewHandler(svc managementv1connect.ManagementServiceHandler, logger *slog.Logger, interceptors ...connect.Interceptor) (http.Handler, error) {
	all := append([]connect.Interceptor{errorInterceptor{logger}}, interceptors...)
	path, h := managementv1connect.NewManagementServiceHandler(svc, connect.WithInterceptors(all...),
		connect.WithCodec(connectJSON{}))
	tc, err := vanguard.NewTranscoder([]*vanguard.Service{vanguard.NewService(path, h)},
		vanguard.WithCodec(func(r vanguard.TypeResolver) vanguard.Codec { return strictJSON{vanguard.NewJSONCodec(r)} }))
	if err != nil {
		return nil, fmt.Errorf("management transcoder: %w", err)
	}
	mux := http.NewServeMux()
	reflector := grpcreflect.NewStaticReflector(managementv1connect.ManagementServiceName)
	mux.Handle(grpcreflect.NewHandlerV1(reflector))
	mux.Handle(grpcreflect.NewHandlerV1Alpha(reflector))
	mux.Handle("/", tc)
	return mux, nil
}

// strictJSON is vanguard's JSON codec with decoding errors reported as
// InvalidArgument.
type strictJSON struct{ *vanguard.JSONCodec }

func malformed(err error) error {
	return apierr.InvalidArgument("API-malformed-json", "malformed JSON body: %v", err)
}

// Unmarshal ignores unknown fields, as the API promises, but refuses an
// unknown enum name: protojson's DiscardUnknown would silently turn it into
// the zero value.
func (c strictJSON) Unmarshal(b []byte, m proto.Message) error {
	if err := unmarshalJSON(c.UnmarshalOptions, b, m); err != nil {
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

// unmarshalJSON is the API's JSON decoding: unknown fields are ignored, an
// unknown enum name is an error (protojson's DiscardUnknown would quietly
// make it the zero value).
func unmarshalJSON(opts protojson.UnmarshalOptions, b []byte, m proto.Message) error {
	opts.DiscardUnknown = false
	err := opts.Unmarshal(b, m)
	if err != nil && strings.Contains(err.Error(), "unknown field") {
		proto.Reset(m)
		opts.DiscardUnknown = true
		err = opts.Unmarshal(b, m)
	}
	return err
}

// connectJSON is connect-go's JSON codec with unmarshalJSON's rules; REST
// bodies reach the handler as Connect JSON through vanguard.
type connectJSON struct{}

func (connectJSON) Name() string { return "json" }

func (connectJSON) Marshal(v any) ([]byte, error) {
	m, ok := v.(proto.Message)
	if !ok {
		return nil, fmt.Errorf("json codec: %T is not a proto.Message", v)
	}
	return protojson.Marshal(m)
}

func (connectJSON) Unmarshal(b []byte, v any) error {
	m, ok := v.(proto.Message)
	if !ok {
		return fmt.Errorf("json codec: %T is not a proto.Message", v)
	}
	if len(b) == 0 {
		return nil // an empty body is an empty message, as in connect-go
	}
	if err := unmarshalJSON(protojson.UnmarshalOptions{}, b, m); err != nil {
		return malformed(err)
	}
	return nil
}

// errorInterceptor turns unexpected errors into Internal, logging the cause
// (the client sees no internals), and keeps connect errors as they are.
type errorInterceptor struct{ logger *slog.Logger }

func (e errorInterceptor) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		res, err := next(ctx, req)
		if err == nil || req.Spec().IsClient {
			return res, err
		}
		var ce *connect.Error
		if errors.As(err, &ce) {
			return nil, ce
		}
		if errors.Is(err, context.Canceled) {
			return nil, connect.NewError(connect.CodeCanceled, err)
		}
		if errors.Is(err, context.DeadlineExceeded) {
			return nil, connect.NewError(connect.CodeDeadlineExceeded, err)
		}
		e.logger.ErrorContext(ctx, "management call failed", "procedure", req.Spec().Procedure, "err", err)
		return nil, connect.NewError(connect.CodeInternal, errors.New("internal error"))
	}
}

func (e errorInterceptor) WrapStreamingClient(n connect.StreamingClientFunc) connect.StreamingClientFunc {
	return n
}

func (e errorInterceptor) WrapStreamingHandler(n connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return n
}
