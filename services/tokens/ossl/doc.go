// Package ossl signs with the system's OpenSSL 3 libcrypto, loaded at run
// time (dlopen) through github.com/golang-fips/openssl, the binding behind
// the Microsoft and Red Hat Go toolchains' crypto.
//
// Why: RSA-2048 signing is nearly all of an RS256 token's cost, and on
// x86-64 OpenSSL signs three to four times faster than crypto/rsa (on the
// development machine 0.29 ms against 1.0–1.15 ms; OpenSSL uses AVX-512 IFMA
// and ADX where the CPU has them). RS256 is the default algorithm, so this
// is most of the token endpoint's throughput. P-256 ECDSA gains less
// (about 30 µs against 40 µs).
//
// Without cgo, or where libcrypto.so.3 cannot be loaded, Load fails and
// callers sign with the Go standard library. A key handed to OpenSSL is
// checked once by verifying a signature with crypto/rsa or crypto/ecdsa, so
// a library that signs wrongly is never used.
package ossl
