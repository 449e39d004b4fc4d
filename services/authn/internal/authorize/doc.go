// Package authorize owns the authorization endpoint (/oauth/v2/authorize,
// OAuth 2.0 RFC 6749 §4.1 and §4.2, OpenID Connect Core §3): parsing and
// validating a request once into a Request, deciding whether a session of
// the browser can answer it or the user must sign in, and completing it
// through the tokens service (a code, or implicit tokens in the fragment).
// Errors go to the redirect_uri, or to an error page on Gatehouse when the
// client or the redirect_uri cannot be trusted.
//
// It depends on the directory (clients, orgs, users), the tokens service
// (codes, implicit tokens, id_token_hint verification) and package session.
package authorize
