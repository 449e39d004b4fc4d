// Package reqinfo carries what edge's router learned about a request — its
// request id, the client address and whether the TCP peer is a trusted proxy —
// in the request context, so the access log, the proxy and any handler mounted
// in-process can use it without re-deriving it from headers. It depends on
// nothing else in edge.
package reqinfo
