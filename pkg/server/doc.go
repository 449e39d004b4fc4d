// Package server runs a Gatehouse HTTP server the same way in every process:
// HTTP/1.1 and HTTP/2 cleartext on one port, /healthz (alive), /readyz
// (dependencies reachable, false once shutdown begins) and /metrics answered
// before the application handler, tracing and an access log around it, and a
// graceful shutdown that lets in-flight requests finish.
package server
