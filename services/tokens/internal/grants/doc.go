// Package grants is the token endpoint (/oauth/v2/token): a dispatcher that
// parses each request once (form body only, no repeated parameters),
// authenticates the client with the methods the grant allows, and hands the
// typed request to the grant named by grant_type — one file per grant.
// Errors are RFC 6749 §5.2 JSON; every response is Cache-Control: no-store.
// The authorization_code and refresh_token grants (authcode.go,
// refresh.go) check the request and the client, then hand over to
// lifecycle, which owns codes, refresh token families and their
// revocation.
// It depends on clients (authentication), mint (tokens), scope, lifecycle,
// and the directory's internal API.
package grants
