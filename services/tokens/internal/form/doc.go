// Package form parses the requests of the form-encoded OAuth endpoints
// (token, introspection, revocation) once, by one set of rules: POST only,
// an application/x-www-form-urlencoded body of bounded size, each parameter
// at most once (RFC 6749 §3.2), parameters from the body only (never the
// query string), and client credentials taken from the Authorization: Basic
// header and the body for clients.Authenticator to judge. It also reads an
// optional form body for userinfo (RFC 6750 §2.2). Errors are
// invalid_request oauth errors. It depends on pkg/oauth and clients.
package form
