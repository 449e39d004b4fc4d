// Package discovery serves GET /.well-known/openid-configuration: the
// OpenID Connect Discovery 1.0 (§3) metadata of what Gatehouse implements,
// and nothing more. The document is serialized once and again only when
// the algorithms of the published signing keys change (they make up
// id_token_signing_alg_values_supported); it is served from memory with
// Cache-Control public, max-age=300. There is deliberately no
// /.well-known/oauth-authorization-server (RFC 8414) endpoint.
//
// It depends on a Source of published keys (keys.Manager).
package discovery
