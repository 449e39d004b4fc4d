-- +goose Up
-- Other services follow the revocation list in the order it was recorded
-- (ListRevocations).
CREATE INDEX revoked_tokens_recorded ON revoked_tokens (revoked_at, token_id);
-- +goose Down
DROP INDEX revoked_tokens_recorded;
