-- +goose Up
-- WebAuthn factors (package users, webauthn.go): security keys (type u2f)
-- and passkeys (passwordless) in user_factors. credential_id: the
-- credential's id, unique across users (a key registered once belongs to
-- one account); credential: the credential record (go-webauthn's JSON:
-- public key, flags, sign count); challenge: a started registration's
-- ceremony data, cleared when it completes.
ALTER TABLE user_factors ADD COLUMN credential_id BYTEA;
ALTER TABLE user_factors ADD COLUMN credential TEXT NOT NULL DEFAULT '';
ALTER TABLE user_factors ADD COLUMN challenge TEXT NOT NULL DEFAULT '';
CREATE UNIQUE INDEX user_factors_credential ON user_factors (credential_id);
-- Login ceremonies in flight: one per binding (a pending authorization
-- request), taken once (deleted) by the check, pruned after expires_at.
CREATE TABLE webauthn_challenges (
    binding    TEXT NOT NULL PRIMARY KEY,
    user_id    TEXT NOT NULL DEFAULT '',
    session    TEXT NOT NULL,
    expires_at TIMESTAMPTZ NOT NULL
);
CREATE INDEX webauthn_challenges_expiry ON webauthn_challenges (expires_at);

-- +goose Down
DROP TABLE webauthn_challenges;
DROP INDEX user_factors_credential;
ALTER TABLE user_factors DROP COLUMN challenge;
ALTER TABLE user_factors DROP COLUMN credential;
ALTER TABLE user_factors DROP COLUMN credential_id;
