// Package router is edge's public HTTP handler: a gin engine that routes by
// the route table (package routes) to the three services, each an
// http.Handler mounted in-process or a proxy.Proxy, with this middleware in
// order:
//
//	recovery -> request id and client address -> access log -> security
//	headers -> CORS (browser-callable OIDC endpoints) -> rate limit by the
//	route's class -> request body limit -> the service
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
// Response headers edge adds are applied when the response header is sent,
// not before the service runs: a proxied service's headers are added to the
// response, so setting them early would duplicate them.
//
// Depends on routes, ratelimit, reqinfo and apierror.
package router
