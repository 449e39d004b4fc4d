// Package reqinfo carries what edge's router learned about a request — its
// request id, the client address, whether the TCP peer is a trusted proxy,
// and the form edge's own errors take on its route — in the request context,
// so the proxy, apierror and any handler mounted in-process can use it
// without re-deriving it from headers. It depends on nothing else in edge.
package reqinfo
