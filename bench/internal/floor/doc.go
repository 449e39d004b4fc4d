// Package floor measures, in-process, the raw cost of the signature
// operations a token endpoint cannot avoid: RS256 (RSA-2048 PKCS #1 v1.5
// over SHA-256) and ES256 (ECDSA P-256 over SHA-256) signing, and RS256
// verification, with the Go standard library and, where it loads, with
// OpenSSL through the tokens service's own signer (what it signs with by
// default). Server CPU per token is judged against these.
package floor
