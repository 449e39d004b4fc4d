// Package apierror writes the errors edge itself answers with (404, 413,
// 429, 503, 500): the small JSON bodies in the OAuth error shape
// {"error": ..., "error_description": ...}, which fit the OIDC endpoints and
// are readable for every other client; HTML pages for a person's top-level
// navigation; and, on the gRPC and Connect routes, the error in the RPC
// protocol the request speaks (connect-go's ErrorWriter), so an RPC client
// reads a status code rather than an HTTP failure. Respond picks the form
// the router recorded for the request's route in reqinfo.
//
// Depends on reqinfo and connect-go.
package apierror
