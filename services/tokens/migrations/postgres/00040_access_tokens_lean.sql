-- +goose Up
-- Every opaque access token is inserted on the token endpoint's hot path;
-- the session and refresh indexes hold only the rows that have one (most
-- tokens have neither), so such an insert updates two indexes fewer.
DROP INDEX access_tokens_session;
DROP INDEX access_tokens_refresh;
CREATE INDEX access_tokens_session ON access_tokens (session_id) WHERE session_id IS NOT NULL;
CREATE INDEX access_tokens_refresh ON access_tokens (refresh_id) WHERE refresh_id IS NOT NULL;

-- +goose Down
DROP INDEX access_tokens_session;
DROP INDEX access_tokens_refresh;
CREATE INDEX access_tokens_session ON access_tokens (session_id);
CREATE INDEX access_tokens_refresh ON access_tokens (refresh_id);
