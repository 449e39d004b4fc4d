// Package proxy forwards requests from edge to a service running in another
// process. gRPC goes over HTTP/2 cleartext (h2c, prior knowledge; HTTP/2
// over TLS for https targets), which it needs for trailers and full-duplex
// streams; everything else, including gRPC-web and Connect, goes over
// HTTP/1.1 keep-alive connections, which Go serves for about a third of
// the CPU of HTTP/2; to an http service, through h1Transport, a client
// that does each round trip on the request's goroutine. A request body of
// known length up to 16 KiB is read first and sent with the header in one
// write. Responses pass unbuffered with their trailers.
//
// It sets X-Forwarded-For/-Proto/-Host (keeping the incoming chain only when
// the router marked the peer as a trusted proxy in reqinfo), sets X-Real-Ip
// and X-Request-Id from reqinfo after the hop-by-hop headers are removed (so
// a client's "Connection: X-Real-Ip" cannot remove them), adds, with
// WithInternalToken, the proof that makes the service believe that
// X-Real-Ip (rpc.GuardClientAddr), and carries the trace context in a
// client span that never records query strings (telemetry.HTTPTransport). An unreachable service is
// answered 503 with Retry-After, never Go's default 502 text: in the form
// the route calls for (apierror.Respond), an OAuth-shaped JSON body, an HTML
// page to a browser route, or the RPC error Unavailable to a gRPC or
// Connect call.
//
// Depends on reqinfo, apierror and pkg/rpc.
package proxy
