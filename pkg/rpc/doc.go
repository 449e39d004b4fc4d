// Package rpc holds what every Connect hop between Gatehouse services shares:
// the internal-call credential as a client/server interceptor pair, an HTTP/2
// cleartext client, and the option sets (tracing, credential) for handlers and
// clients. Internal services refuse calls without the credential with
// Unauthenticated.
package rpc
