// Package users owns the user aggregate: human and machine users, their
// passwords (argon2id hashes, history, change-required flag), state
// (deactivate, reactivate, remove — a removal also ends the user's org and
// instance memberships through those aggregates, in the same transaction),
// the unlock that forgets its failed-password counters (package lockout),
// machine keys (public keys only), machine secrets (keyed hashes) and links
// to identities at the organization's external IdPs —
// events, reducers into the users, password_history and machine_keys
// projections, commands and queries (by id, client id, key id, and the
// filtered, paged user search of ListUsers). Metadata events live on this
// aggregate but are reduced by package metadata. Password policy comes from
// the user's organization.
package users
