// Package proxy forwards requests from edge to a service running in another
// process, over HTTP/2 cleartext (h2c, prior knowledge) inside the cluster or
// HTTP/2 over TLS for https targets. One connection multiplexes every call,
// and gRPC, gRPC-web and server streaming pass unbuffered with their
// trailers. HTTP/1.1 client requests are forwarded over h2c too.
//
// It sets X-Forwarded-For/-Proto/-Host (keeping the incoming chain only when
// the router marked the peer as a trusted proxy in reqinfo), keeps
// X-Request-Id, and injects the trace context through otelhttp without
// recording query strings in spans. An unreachable service is answered 503
// with Retry-After and an OAuth-shaped JSON body, never Go's default 502 text.
//
// Depends on reqinfo and apierror.
package proxy
