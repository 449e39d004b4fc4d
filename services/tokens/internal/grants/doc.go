// Package grants is the token endpoint (/oauth/v2/token): a dispatcher that
// parses each request once (form body only, no repeated parameters),
// authenticates the client with the methods the grant's Spec allows, checks
// that the client may use the grant (its kind, its registered grant types),
// decodes the grant's parameters into its typed Request, and hands it to
// the grant named by grant_type — one file per grant. A grant is
// registered with its Spec, so none can skip client authentication.
// Errors are RFC 6749 §5.2 JSON; every response is Cache-Control: no-store.
// The authorization_code and refresh_token grants (authcode.go,
// refresh.go) check the request and the client, then hand over to
// lifecycle, which owns codes, refresh token families and their
// revocation.
// It depends on clients (authentication), mint (tokens), scope, lifecycle,
// and the directory's internal API.
package grants
