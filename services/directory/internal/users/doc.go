// Package users owns the user aggregate: human and machine users, their
// passwords (argon2id hashes, history, change-required flag), state,
// metadata, machine keys and machine secrets — events, reducers into the
// users, password_history, user_metadata and machine_keys projections,
// commands and queries. Password policy comes from the user's organization.
package users
