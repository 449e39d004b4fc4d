-- +goose Up
-- The CSRF token of a browser's forms is bound to its user agent row; a
-- session remembers the login name it was opened with (account selection,
-- login_hint); pending authorization requests wait here while the user
-- signs in, addressed by an opaque id carried in the login page URLs.
ALTER TABLE user_agents ADD COLUMN csrf_token TEXT NOT NULL DEFAULT '';
ALTER TABLE sessions ADD COLUMN login_name TEXT NOT NULL DEFAULT '';
ALTER TABLE sessions ADD COLUMN display_name TEXT NOT NULL DEFAULT '';
CREATE TABLE auth_requests (
    id            TEXT     PRIMARY KEY,
    user_agent_id TEXT     NOT NULL REFERENCES user_agents (id) ON DELETE CASCADE,
    params        TEXT     NOT NULL,
    login_name    TEXT     NOT NULL DEFAULT '',
    user_id       TEXT     NOT NULL DEFAULT '',
    created_at    DATETIME NOT NULL,
    expires_at    DATETIME NOT NULL
);
CREATE INDEX auth_requests_expires_at ON auth_requests (expires_at);

-- +goose Down
DROP TABLE auth_requests;
ALTER TABLE sessions DROP COLUMN display_name;
ALTER TABLE sessions DROP COLUMN login_name;
ALTER TABLE user_agents DROP COLUMN csrf_token;
