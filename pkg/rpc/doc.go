// Package rpc holds what every Connect hop between Gatehouse services shares:
// the internal-call credential as a client/server interceptor pair, an HTTP/2
// cleartext client, and the option sets (tracing, credential) for handlers and
// clients. Internal services refuse calls without the credential with
// Unauthenticated.
//
// It also owns the one HTTP hop that is not Connect, edge to a service: the
// client address edge resolved travels in X-Real-Ip with a proof derived from
// the internal token (EdgeProof), and GuardClientAddr, in front of every
// service process, believes the address only with that proof.
package rpc
