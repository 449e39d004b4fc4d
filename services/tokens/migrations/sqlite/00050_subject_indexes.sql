-- +goose Up
-- A user's tokens are revoked together when the user is deactivated,
-- locked or removed, or an admin resets the password (RevokeUserTokens).
CREATE INDEX refresh_tokens_subject ON refresh_tokens (subject);
CREATE INDEX auth_codes_subject ON auth_codes (subject);

-- +goose Down
DROP INDEX auth_codes_subject;
DROP INDEX refresh_tokens_subject;
