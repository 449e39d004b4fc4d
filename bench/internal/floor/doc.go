// Package floor measures, in-process, the raw cost of the operations a
// request cannot avoid: RS256 (RSA-2048 PKCS #1 v1.5 over SHA-256) and
// ES256 (ECDSA P-256 over SHA-256) signing, and RS256 verification, with
// the Go standard library and, where it loads, with OpenSSL through the
// tokens service's own signer (what it signs with by default); and a
// login's argon2id password check through the server's own pkg/secrets,
// with its parameters. Server CPU per token or login is judged against
// these.
package floor
