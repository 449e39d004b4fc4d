-- +goose Up
-- Revoked tokens (access token ids, JWT jti values, refresh token ids),
-- kept until the token expires. This table is the durable revocation
-- list; the Redis or in-memory list is rebuilt from it. pending marks a
-- row not yet confirmed in the Redis list, so any replica can push it.
CREATE TABLE revoked_tokens (
    token_id   TEXT     PRIMARY KEY,
    expires_at DATETIME NOT NULL,
    revoked_at DATETIME NOT NULL,
    pending    BOOLEAN  NOT NULL DEFAULT FALSE
);
CREATE INDEX revoked_tokens_expires ON revoked_tokens (expires_at);
CREATE INDEX revoked_tokens_pending ON revoked_tokens (token_id) WHERE pending = TRUE;

-- +goose Down
DROP TABLE revoked_tokens;
