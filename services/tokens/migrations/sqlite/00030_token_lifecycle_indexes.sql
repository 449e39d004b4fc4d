-- +goose Up
-- Lookups of the authorization code and refresh token lifecycle: logout
-- voids a session's unused codes, and pruning deletes expired codes and
-- refresh tokens, without scanning the tables.
CREATE INDEX auth_codes_session ON auth_codes (session_id);
CREATE INDEX auth_codes_expires ON auth_codes (expires_at);
CREATE INDEX refresh_tokens_expires ON refresh_tokens (expires_at);

-- +goose Down
DROP INDEX refresh_tokens_expires;
DROP INDEX auth_codes_expires;
DROP INDEX auth_codes_session;
