// Package jwks serves the key set endpoint, GET /oauth/v2/keys: a JSON Web
// Key Set (RFC 7517 §5) of the published public signing keys, each with
// kid, use "sig" and alg. The body is serialized once per change of the key
// set and served from memory with Cache-Control max-age (shorter than the
// keys' pre-publication window, so a cached set always holds the key that
// signs next) and an ETag for conditional requests.
//
// It depends only on a Source of published keys (keys.Manager).
package jwks
