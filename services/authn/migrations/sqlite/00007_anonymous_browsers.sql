-- +goose Up
-- A browser is recorded only with its first session: a pending request of
-- an anonymous browser names it by its cookie's hash alone, so the foreign
-- key to user_agents goes (SQLite rebuilds the table for that). Requests
-- and identity-provider flows are looked up by browser at every sign-in
-- (RotateUserAgent) and by the pruner: indexed.
CREATE TABLE auth_requests_new (
    id            TEXT     PRIMARY KEY,
    user_agent_id TEXT     NOT NULL,
    params        TEXT     NOT NULL,
    login_name    TEXT     NOT NULL DEFAULT '',
    user_id       TEXT     NOT NULL DEFAULT '',
    created_at    DATETIME NOT NULL,
    expires_at    DATETIME NOT NULL,
    external      TEXT     NOT NULL DEFAULT ''
);
INSERT INTO auth_requests_new (id, user_agent_id, params, login_name, user_id, created_at, expires_at, external)
    SELECT id, user_agent_id, params, login_name, user_id, created_at, expires_at, external FROM auth_requests;
DROP TABLE auth_requests;
ALTER TABLE auth_requests_new RENAME TO auth_requests;
CREATE INDEX auth_requests_expires_at ON auth_requests (expires_at);
CREATE INDEX auth_requests_user_agent_id ON auth_requests (user_agent_id);
CREATE INDEX idp_flows_user_agent_id ON idp_flows (user_agent_id);

-- +goose Down
DROP INDEX idp_flows_user_agent_id;
DELETE FROM auth_requests WHERE user_agent_id NOT IN (SELECT id FROM user_agents);
CREATE TABLE auth_requests_old (
    id            TEXT     PRIMARY KEY,
    user_agent_id TEXT     NOT NULL REFERENCES user_agents (id) ON DELETE CASCADE,
    params        TEXT     NOT NULL,
    login_name    TEXT     NOT NULL DEFAULT '',
    user_id       TEXT     NOT NULL DEFAULT '',
    created_at    DATETIME NOT NULL,
    expires_at    DATETIME NOT NULL,
    external      TEXT     NOT NULL DEFAULT ''
);
INSERT INTO auth_requests_old SELECT id, user_agent_id, params, login_name, user_id, created_at, expires_at, external FROM auth_requests;
DROP TABLE auth_requests;
ALTER TABLE auth_requests_old RENAME TO auth_requests;
CREATE INDEX auth_requests_expires_at ON auth_requests (expires_at);
