-- +goose Up
-- Token exchange (RFC 8693): an exchanged access token carries the act
-- claim of its delegation chain (JSON; NULL without one), and names the
-- access token it was exchanged from (parent_id), so that revoking that
-- token revokes what was exchanged from it.
ALTER TABLE access_tokens ADD COLUMN act TEXT;
ALTER TABLE access_tokens ADD COLUMN parent_id TEXT;
-- An impersonation's token names its impersonator, whose right is checked
-- again whenever it is exchanged; exchange_depth counts the exchanges
-- down from a token not exchanged (bounded, so revocation reaches the end
-- of every chain).
ALTER TABLE access_tokens ADD COLUMN impersonator TEXT;
ALTER TABLE access_tokens ADD COLUMN exchange_depth INTEGER NOT NULL DEFAULT 0;
CREATE INDEX access_tokens_impersonator ON access_tokens (impersonator) WHERE impersonator IS NOT NULL;
CREATE INDEX access_tokens_parent ON access_tokens (parent_id) WHERE parent_id IS NOT NULL;
-- Browser sessions ended by logout, while an ID token of theirs may still
-- be presented: such a token is no subject for an exchange.
CREATE TABLE ended_sessions (
    session_id TEXT PRIMARY KEY,
    expires_at DATETIME NOT NULL
);
CREATE INDEX ended_sessions_expires ON ended_sessions (expires_at);
-- DPoP (RFC 9449 §10): the key thumbprint an authorization code must be
-- redeemed with ('' when unbound).
ALTER TABLE auth_codes ADD COLUMN dpop_jkt TEXT NOT NULL DEFAULT '';
-- +goose Down
ALTER TABLE auth_codes DROP COLUMN dpop_jkt;
DROP TABLE ended_sessions;
DROP INDEX access_tokens_parent;
DROP INDEX access_tokens_impersonator;
ALTER TABLE access_tokens DROP COLUMN exchange_depth;
ALTER TABLE access_tokens DROP COLUMN impersonator;
ALTER TABLE access_tokens DROP COLUMN parent_id;
ALTER TABLE access_tokens DROP COLUMN act;
