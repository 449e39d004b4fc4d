// Package userinfo is the OpenID Connect UserInfo endpoint,
// GET and POST /oidc/v1/userinfo (OIDC Core §5.3). The access token comes
// as a Bearer Authorization header (RFC 6750 §2.1) or, on POST, as
// access_token in a form body (§2.2) — never both, and never in the query
// string. The token is checked by the accesstoken.Verifier (signature or
// record, expiry, revocation list); the answer is the user's claims for the
// token's scopes from the directory, which requires the openid scope.
// Errors follow RFC 6750 §3: a WWW-Authenticate: Bearer challenge with the
// error code (none when no token was sent).
//
// It depends on introspection (validation and claims), form (body parsing)
// and pkg/oauth (errors). CORS is edge's job.
package userinfo
