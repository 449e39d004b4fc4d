// Package secrets holds Gatehouse's cryptographic building blocks shared by
// the services: authenticated encryption at rest under the master key
// (AES-256-GCM with purpose-bound subkeys), keyed hashes of high-entropy
// secrets (HMAC-SHA-256, fast enough for the token endpoint), user password
// hashes (argon2id; bcrypt accepted on import), random tokens and ids.
package secrets
