// Package redirecturi decides whether an authorization request's
// redirect_uri is one a client registered: the exact string (RFC 6749
// §3.1.2.3, RFC 9700 §2.1), except that a native app's loopback redirect
// URI may differ in its port (RFC 8252 §7.3). authn checks it at the
// authorization endpoint and tokens again when it makes the code; post-logout
// redirects and the token request's redirect_uri stay exact. Depends only on
// the directory API's Client.
package redirecturi
