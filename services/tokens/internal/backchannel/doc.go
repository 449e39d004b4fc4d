// Package backchannel sends OpenID Connect Back-Channel Logout 1.0 logout
// tokens: when a browser session ends, every app that received tokens in
// it gets a POST of a logout token at its registered
// backchannel_logout_uri.
//
// # Durability
//
// The revocation that ends a session (lifecycle.RevokeSession, or
// RevokeUserTokens for a user's cut-off) moves the session's apps from
// session_clients into the backchannel_logouts outbox in its own
// transaction (store.QueueSessionLogouts, QueueUserLogouts), so a logout
// that succeeded always has its deliveries queued, through restarts. The
// logout itself only enqueues; Outbox sends in the background, kicked
// right after the enqueue and sweeping the outbox periodically.
//
// # Delivery
//
// Each try is claimed first with a conditional UPDATE of the row's lease
// (next_attempt_at), so of several tokens replicas sharing a PostgreSQL
// outbox one sends it; a sender that dies mid-try leaves a lease that
// runs out, and the row is due again. The app's URI is read from the
// directory at each try (the client's registration now, bypassing the
// cache): a client removed, or without a URI, drops the row, so nothing is
// ever sent to a URI that is not registered. A 2xx answer is delivered;
// any other answer, a redirect included (redirects are not followed), a
// network error or the 5 s timeout is retried with exponential backoff
// (1 s doubling to 1 h) until GiveUp after the logout, when it is dropped
// with a warning. Calls go through pkg/netguard with the identity
// providers' address policy: a back-channel URI is chosen by whoever
// registers the app, so it must not reach loopback, private or metadata
// addresses the operator has not allowed. Logs name the client and the
// answer's status, never the URI or the token.
//
// It depends on the record store (the outbox), the clients cache (the
// directory's current registration) and the signing keys (the logout
// token is signed like an ID token, with typ logout+jwt).
package backchannel
