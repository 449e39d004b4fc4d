// Package introspection builds the tokens service's own access token
// verifier ([NewVerifier]: an accesstoken.Verifier with JWTs checked by
// keys.Manager.Verify, keys parsed once, and opaque tokens found by their
// keyed hash). On that it serves the internal Introspect for directory
// ([Internal]), the public RFC 7662 endpoint POST /oauth/v2/introspect
// ([Endpoint]), and userinfo's token check; [UserClaims] fetches a token's
// user claims from the directory for both public endpoints.
//
// It depends on keys (verification), store (opaque token records),
// revocation (through the Revocations interface), clients
// (authentication), form (request parsing), pkg/oauth (errors) and the
// directory's internal API (GetClaims). Subpackage tokentest builds this
// whole stack on a real database for endpoint tests.
package introspection
