-- +goose Up
-- Every opaque access token is inserted (and fsynced) on the token
-- endpoint's hot path, and each b-tree an insert touches is a page written
-- to the WAL. The table is keyed by its id (WITHOUT ROWID: one b-tree
-- instead of the rowid table plus the id index), and the session and
-- refresh indexes hold only the rows that have one (most tokens have
-- neither). Four b-trees per insert instead of six.
CREATE TABLE access_tokens_new (
    id          TEXT     PRIMARY KEY,
    token_hash  BLOB     UNIQUE,
    client_id   TEXT     NOT NULL,
    subject     TEXT     NOT NULL,
    org_id      TEXT     NOT NULL,
    scopes      TEXT     NOT NULL,
    audience    TEXT     NOT NULL,
    session_id  TEXT,
    refresh_id  TEXT,
    auth_time   DATETIME,
    amr         TEXT     NOT NULL,
    created_at  DATETIME NOT NULL,
    expires_at  DATETIME NOT NULL
) WITHOUT ROWID;
INSERT INTO access_tokens_new SELECT id, token_hash, client_id, subject, org_id, scopes, audience,
    session_id, refresh_id, auth_time, amr, created_at, expires_at FROM access_tokens;
DROP TABLE access_tokens;
ALTER TABLE access_tokens_new RENAME TO access_tokens;
CREATE INDEX access_tokens_session ON access_tokens (session_id) WHERE session_id IS NOT NULL;
CREATE INDEX access_tokens_refresh ON access_tokens (refresh_id) WHERE refresh_id IS NOT NULL;
CREATE INDEX access_tokens_expires ON access_tokens (expires_at);

-- +goose Down
CREATE TABLE access_tokens_old (
    id          TEXT     PRIMARY KEY,
    token_hash  BLOB     UNIQUE,
    client_id   TEXT     NOT NULL,
    subject     TEXT     NOT NULL,
    org_id      TEXT     NOT NULL,
    scopes      TEXT     NOT NULL,
    audience    TEXT     NOT NULL,
    session_id  TEXT,
    refresh_id  TEXT,
    auth_time   DATETIME,
    amr         TEXT     NOT NULL,
    created_at  DATETIME NOT NULL,
    expires_at  DATETIME NOT NULL
);
INSERT INTO access_tokens_old SELECT id, token_hash, client_id, subject, org_id, scopes, audience,
    session_id, refresh_id, auth_time, amr, created_at, expires_at FROM access_tokens;
DROP TABLE access_tokens;
ALTER TABLE access_tokens_old RENAME TO access_tokens;
CREATE INDEX access_tokens_session ON access_tokens (session_id);
CREATE INDEX access_tokens_refresh ON access_tokens (refresh_id);
CREATE INDEX access_tokens_expires ON access_tokens (expires_at);
