-- +goose Up
-- A browser (user agent, identified by its cookie) holds sessions of one or
-- more users; each session records when and how its user authenticated.
CREATE TABLE user_agents (
    id           TEXT     PRIMARY KEY,
    created_at   TIMESTAMPTZ NOT NULL,
    last_seen_at TIMESTAMPTZ NOT NULL
);
CREATE TABLE sessions (
    id            TEXT     PRIMARY KEY,
    user_agent_id TEXT     NOT NULL REFERENCES user_agents (id) ON DELETE CASCADE,
    user_id       TEXT     NOT NULL,
    org_id        TEXT     NOT NULL,
    auth_time     TIMESTAMPTZ NOT NULL,
    amr           TEXT     NOT NULL,
    created_at    TIMESTAMPTZ NOT NULL,
    ended_at      TIMESTAMPTZ,
    UNIQUE (user_agent_id, user_id)
);

-- +goose Down
DROP TABLE sessions;
DROP TABLE user_agents;
