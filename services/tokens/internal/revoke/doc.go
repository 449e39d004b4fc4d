// Package revoke is the revocation endpoint, POST /oauth/v2/revoke
// (RFC 7009). It authenticates the client by any of the four methods,
// finds the token — an access token through its accesstoken.Verifier, a
// refresh token through a RefreshRevoker — and revokes it only when it was
// issued to that client. An access token is revoked alone, on the
// revocation list until its expiry; revoking a refresh token is delegated
// (the refresh store revokes it and the access tokens issued from it).
// Unknown, expired, already revoked and other clients' tokens all get the
// same empty 200, so the endpoint reveals nothing about them.
//
// It depends on clients (authentication), form (request parsing),
// introspection (token validation) and pkg/oauth (errors).
package revoke
