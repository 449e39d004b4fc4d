// Package oauth holds the OAuth 2.0 error type shared by the tokens and
// authn services (RFC 6749 §4.1.2.1, §5.2; RFC 6750 §3): a code, a
// client-safe description, the HTTP status, and a wrapped cause that is
// never serialized. Errors compare by code with errors.Is. It also names the
// amr (RFC 8176) and acr values both services use, and how one maps to the
// other.
package oauth
