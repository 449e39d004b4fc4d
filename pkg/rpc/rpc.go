package rpc

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"time"

	"connectrpc.com/connect"

	"github.com/gatehouse-id/gatehouse/pkg/logging"
	"github.com/gatehouse-id/gatehouse/pkg/telemetry"
)

// NewH2CTransport returns a transport speaking HTTP/2 cleartext with prior
// knowledge, for gRPC clients of a service (trailers and streaming intact).
func NewH2CTransport() *http.Transport {
	p := new(http.Protocols)
	p.SetUnencryptedHTTP2(true)
	return &http.Transport{
		Protocols:           p,
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConnsPerHost: 16,
		IdleConnTimeout:     90 * time.Second,
		ForceAttemptHTTP2:   true,
	}
}

// NewHTTPClient returns the client for internal Connect calls: the Connect
// protocol's unary calls over HTTP/1.1 keep-alive connections, which Go
// serves for about a third of the CPU of HTTP/2 (see edge's proxy).
func NewHTTPClient() *http.Client {
	p := new(http.Protocols)
	p.SetHTTP1(true)
	return &http.Client{Transport: &http.Transport{
		Protocols:           p,
		Proxy:               nil, // never through HTTP_PROXY from the environment
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConnsPerHost: 256, // one request per connection at a time
		IdleConnTimeout:     90 * time.Second,
	}}
}

// InternalClientOptions are the options of a client for an internal service:
// tracing, the request id, the internal credential and the call deadlines
// (see InternalCallTimeout). Replies are not
// compressed: between services on one network gzip costs both sides more
// CPU than the bytes it saves (a GetClaims reply is a few hundred bytes).
func InternalClientOptions(token string) ([]connect.ClientOption, error) {
	otel, err := telemetry.ConnectInterceptor()
	if err != nil {
		return nil, fmt.Errorf("connect tracing: %w", err)
	}
	return []connect.ClientOption{
		connect.WithInterceptors(otel, forwardRequestID{}, NewInternalAuth(token), NewCallDeadline(InternalCallTimeout, InternalHashingCallTimeout)),
		connect.WithAcceptCompression("gzip", nil, nil), // removes connect's default
		// Reads (idempotency_level NO_SIDE_EFFECTS: the feeds, key set and
		// directory lookups; never a call carrying a token or a password)
		// are HTTP GETs, which a caller may safely retry.
		connect.WithHTTPGet(),
	}, nil
}

// forwardRequestID sends the context's request id (logging.RequestID) with
// an internal call, so the callee's log lines carry the request's id.
type forwardRequestID struct{}

func (forwardRequestID) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		if id := logging.RequestID(ctx); id != "" && req.Spec().IsClient {
			req.Header().Set("X-Request-Id", id)
		}
		return next(ctx, req)
	}
}

func (forwardRequestID) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return func(ctx context.Context, spec connect.Spec) connect.StreamingClientConn {
		conn := next(ctx, spec)
		if id := logging.RequestID(ctx); id != "" {
			conn.RequestHeader().Set("X-Request-Id", id)
		}
		return conn
	}
}

func (forwardRequestID) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return next
}

// internalCompressMinBytes is the least reply an internal handler
// compresses for a caller that accepts gzip.
const internalCompressMinBytes = 64 << 10

// maxInternalMessageBytes bounds a request message to an internal
// service, decompressed: connect-go decompresses it whole before the
// internal token is checked.
const maxInternalMessageBytes = 16 << 20

// InternalHandlerOptions are the options of an internal service's handler:
// tracing, then the credential check; a caller that asks for gzip (not
// Gatehouse's own) gets only large replies compressed.
func InternalHandlerOptions(token string) ([]connect.HandlerOption, error) {
	otel, err := telemetry.ConnectInterceptor()
	if err != nil {
		return nil, fmt.Errorf("connect tracing: %w", err)
	}
	return []connect.HandlerOption{connect.WithInterceptors(otel, NewInternalAuth(token)), connect.WithCompressMinBytes(internalCompressMinBytes),
		connect.WithReadMaxBytes(maxInternalMessageBytes)}, nil
}

// PublicHandlerOptions are the options of a public Connect handler: tracing
// and the bound on a request message (as restapi.MaxMessageBytes).
func PublicHandlerOptions() ([]connect.HandlerOption, error) {
	otel, err := telemetry.ConnectInterceptor()
	if err != nil {
		return nil, fmt.Errorf("connect tracing: %w", err)
	}
	return []connect.HandlerOption{connect.WithInterceptors(otel), connect.WithReadMaxBytes(maxInternalMessageBytes / 2)}, nil
}
