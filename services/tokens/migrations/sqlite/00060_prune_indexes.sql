-- +goose Up
-- The pruner deletes by these expiries in batches; without an index each
-- batch would scan the table.
CREATE INDEX refresh_tokens_family_expires ON refresh_tokens (family_expires_at);
CREATE INDEX assertion_jtis_expires ON assertion_jtis (expires_at);
-- +goose Down
DROP INDEX assertion_jtis_expires;
DROP INDEX refresh_tokens_family_expires;
