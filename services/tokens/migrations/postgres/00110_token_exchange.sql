-- +goose Up
-- Token exchange (RFC 8693): an exchanged access token carries the act
-- claim of its delegation chain (JSON; NULL without one), and names the
-- access token it was exchanged from (parent_id), so that revoking that
-- token revokes what was exchanged from it.
ALTER TABLE access_tokens ADD COLUMN act TEXT;
ALTER TABLE access_tokens ADD COLUMN parent_id TEXT;
CREATE INDEX access_tokens_parent ON access_tokens (parent_id) WHERE parent_id IS NOT NULL;
-- Browser sessions ended by logout, while an ID token of theirs may still
-- be presented: such a token is no subject for an exchange.
CREATE TABLE ended_sessions (
    session_id TEXT PRIMARY KEY,
    expires_at TIMESTAMPTZ NOT NULL
);
CREATE INDEX ended_sessions_expires ON ended_sessions (expires_at);
-- DPoP (RFC 9449 §10): the key thumbprint an authorization code must be
-- redeemed with ('' when unbound).
ALTER TABLE auth_codes ADD COLUMN dpop_jkt TEXT NOT NULL DEFAULT '';
-- +goose Down
ALTER TABLE auth_codes DROP COLUMN dpop_jkt;
DROP TABLE ended_sessions;
DROP INDEX access_tokens_parent;
ALTER TABLE access_tokens DROP COLUMN parent_id;
ALTER TABLE access_tokens DROP COLUMN act;
