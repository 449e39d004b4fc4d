-- +goose Up
-- DPoP (RFC 9449): the thumbprint (jkt) of the key an access token, or a
-- public client's refresh token, is bound to; NULL for bearer tokens.
ALTER TABLE access_tokens ADD COLUMN jkt TEXT;
ALTER TABLE refresh_tokens ADD COLUMN jkt TEXT;
-- The embedded server remembers DPoP proofs in memory; it keeps what it
-- remembers here between a clean stop and the next start (SHA-256 of the
-- key's thumbprint and the proof's jti).
CREATE TABLE dpop_replay_snapshot (
    proof_key  BLOB PRIMARY KEY,
    expires_at DATETIME NOT NULL
);
-- +goose Down
DROP TABLE dpop_replay_snapshot;
ALTER TABLE refresh_tokens DROP COLUMN jkt;
ALTER TABLE access_tokens DROP COLUMN jkt;
