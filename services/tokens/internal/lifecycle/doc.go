// Package lifecycle owns the tokens of a user's login after authn has
// authenticated them: authorization codes (created for authn, exchanged at
// the token endpoint), refresh token families (rotated on every use), the
// access and ID tokens issued with them, and their revocation — by code
// replay, refresh token reuse, the revocation endpoint, or logout of the
// browser session. It also issues the implicit flow's tokens and verifies
// id_token_hint values for authn.
//
// # Records and revocation
//
// Codes and refresh tokens are opaque 256-bit values stored only as keyed
// hashes (secrets.Hasher). Every access token issued here is recorded
// (JWTs too) with its session and refresh token, so that revocation can
// find it. Revoking marks the refresh tokens revoked in the same database
// transaction that finds the live access tokens, then puts those access
// tokens on the revocation list (revocation.List.RevokeMany, durable in
// its own table). Should that second step fail, the refresh tokens stay
// revoked and the caller gets an error; presenting a revoked refresh
// token or a used code again repeats the push, which is idempotent.
//
// # Concurrency
//
// A code exchange and a refresh rotation each claim their code or token
// with a conditional UPDATE in the transaction that records what they
// issue, so of several concurrent requests with one code or refresh token
// exactly one succeeds; a loser sees a replay or reuse and is answered
// invalid_grant (and, unless it may have a sibling within the reuse grace,
// revokes what the winner issued, as for any reuse); a sibling is claimed
// the same way (ClaimRefreshSibling), so concurrent ones stay within
// MaxRedemptions.
//
// # Reuse grace
//
// A confidential client's rotated refresh token presented again within
// RefreshReuseGrace of its rotation (a parallel refresh; a client that
// lost the response) succeeds once more, with a sibling replacement in the
// same family, so the client holds a working refresh token whichever
// response it keeps: MaxRedemptions (2) redemptions of one token in all.
// A further one, past the grace (default 10 s), with a grace of 0, or any
// reuse by a public client (token_endpoint_auth_method none, which nothing
// but the token authenticates) revokes the family.
//
// It depends on store (records), mint (tokens), the revocation list, the
// signing keys (for verifying ID tokens), clients (lookup) and the
// directory's internal API (users, claims).
package lifecycle
