// Package keys owns the tokens service's signing keys: their generation
// (RS256 with RSA 2048 by default; ES256 with P-256 and EdDSA with Ed25519
// selectable), their storage in the signing_keys table with the private key
// encrypted under the master key (secrets.PurposeSigningKeys, the key id as
// additional data), their lifecycle and rotation across replicas, and the
// hot paths that use them: a compact JWS signer and verifier that call
// crypto directly with keys parsed once per process.
//
// # Lifecycle
//
// A key is published (in the key set, see PublicKeys) from created_at. It
// signs only from sign_from = created_at + PrePublish, which exceeds the key
// set's Cache-Control max-age plus the reload interval plus the second edge
// may keep the set (rpc.EdgeCacheMaxAge), so every replica
// has loaded it and every relying party's cached key set contains it before
// a token carries its kid. It stops signing (retire_at) when its
// successor's sign_from arrives, and leaves the key set at expires_at =
// retire_at + the longest lifetime of a token it signs + ExpirySkew, when
// every token it signed has expired; the manager then deletes it. Both
// retire_at and expires_at are written, in the transaction that creates the
// successor, on the key that was newest until then.
//
// The very first key (empty table) signs at once: nothing has been issued
// yet, so no relying party can hold a cached key set that lacks it, and a
// fresh installation can issue tokens immediately. A relying party that
// fetched the empty key set moments before refetches on the unknown kid.
//
// # Replicas
//
// Replicas share the table and coordinate only through it. Each key has a
// generation one above its predecessor's, unique in the table, so when
// several replicas (or admins) rotate at once exactly one insert of the next
// generation succeeds; a losing automatic rotation simply reloads, a losing
// on-demand rotation reports ErrConcurrentRotation. Every replica reloads
// the table each ReloadInterval (Start runs the loop) and picks its signing
// key by its own clock as the newest key whose sign_from has passed, so it
// never signs with a key before sign_from. A replica that cannot reload
// keeps signing for at most PrePublish after its last successful load (any
// key created since then cannot sign before that), after which Signer
// returns ErrStale rather than sign with a key that others may have retired.
//
// # Dependencies
//
// pkg/db for storage (the table comes from services/tokens/migrations),
// pkg/secrets for encryption at rest and ids, and jwx/v3 only to build and
// parse public JWKs; signing and verification use crypto/rsa, crypto/ecdsa
// and crypto/ed25519 directly.
package keys
