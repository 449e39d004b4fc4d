// Package router is edge's public HTTP handler: a gin engine that routes by
// the route table (package routes) to the three services, each an
// http.Handler mounted in-process or a proxy.Proxy. Its pipeline is gin
// middleware, in this order:
//
//	every request (engine.Use):
//	  identify        request id, client address, the request's state
//	  accessLog       one line per request, written last
//	  recovery        gin's recovery: a panic is logged and answered 500
//	  securityHeaders edge's response headers, added when the header is sent
//	a table route (the table group):
//	  route           which route gin matched; 404 for a non-canonical path
//	  cors            CORS preflights and headers (browser-callable OIDC endpoints)
//	  bodyDeadline    the request body must arrive within the body timeout
//	  limit           the rate limit of the route's class (one group per
//	                  routes.Class, each with its limiter; none for a class
//	                  without one)
//	  bodyLimit       the route's request body limit
//	  the service     gin.WrapH of its handler
//	any other path (NoRoute): the browser class's rate limit, then 404
//
// Per-request state (the request id and client address, the matched route,
// the response writers edge wraps) is one struct, allocated by identify,
// stored in gin's context under one key and read through stateOf; what the
// services and the proxy need of it travels in the request context
// (reqinfo).
//
// The rate limit charges the budget of the route's class (routes.Class),
// keyed by client address, by the OAuth client a token, introspection or
// revocation request names (read from its Basic credentials or its form,
// which is put back for the service), or by the bearer token; requests
// keyed by a client or token are also charged to the address cap. Discovery
// and the key set are never limited.
//
// Unknown paths, non-canonical paths and every internal Connect service are
// answered 404 {"error":"not_found"}. Routes are registered explicitly (never
// through NoRoute), so a service's status reaches the client unchanged.
//
// Edge's own errors take the form the route calls for (reqinfo.ErrorForm,
// apierror.Respond): the OAuth JSON error on the OIDC endpoints and the REST
// APIs, an HTML page on browser routes, and on the gRPC and Connect routes
// and unknown paths the error in the RPC protocol the request declares
// (gRPC, gRPC-web, Connect): Unimplemented for an unknown procedure,
// ResourceExhausted for a body too large or a rate limit (with
// Retry-After), Unavailable for an unreachable service (with Retry-After),
// Internal for a panic.
//
// Response headers edge adds are applied when the response header is sent,
// not before the service runs: a proxied service's headers are added to the
// response, so setting them early would duplicate them.
//
// Depends on routes, ratelimit, reqinfo, microcache and apierror.
package router
