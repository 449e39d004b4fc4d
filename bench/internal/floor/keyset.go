package floor

import "strings"

// KeySetHeaders are the header fields of Gatehouse's key set response
// (GET /oauth/v2/keys) besides Date and Content-Length, which net/http
// writes: the bare server of the floor answers with them, so that the
// key-set target compares Gatehouse with "a bare Go server answering the
// same bytes" (issue 14). The launch tests check them against a running
// Gatehouse; ETag and X-Request-Id differ per key set and per request,
// and have the same length here.
var KeySetHeaders = [][2]string{
	{"Access-Control-Allow-Origin", "*"},
	{"Access-Control-Expose-Headers", "WWW-Authenticate, Retry-After, X-Request-Id, DPoP-Nonce, RateLimit-Limit, RateLimit-Remaining, RateLimit-Reset"},
	{"Cache-Control", "public, max-age=60"},
	{"Content-Security-Policy", "frame-ancestors 'none'"},
	{"Content-Type", "application/json"},
	{"Etag", `"rSE9iQ-m4p1qZt-TOlY-iA"`},
	{"Referrer-Policy", "no-referrer"},
	{"X-Content-Type-Options", "nosniff"},
	{"X-Frame-Options", "DENY"},
	{"X-Request-Id", "56f85ac5f5ae9aeaef236659a766b398"},
}

// KeySetBody is the size and shape of a key set holding one RS256 key
// (RSA-2048), as the bench's RS256 runs serve it: 437 bytes.
var KeySetBody = []byte(`{"keys":[{"alg":"RS256","e":"AQAB","kid":"384671240539918336","kty":"RSA","n":"` +
	strings.Repeat("w", 342) + `","use":"sig"}]}`)
