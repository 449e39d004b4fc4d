-- +goose Up
-- Issued tokens that must be looked up later. Opaque access tokens and
-- refresh tokens are stored as keyed hashes, never in clear. Stateless JWT
-- access tokens are recorded only when tied to a browser session or a
-- refresh token (so logout and refresh revocation can reach them).
CREATE TABLE access_tokens (
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
CREATE INDEX access_tokens_session ON access_tokens (session_id);
CREATE INDEX access_tokens_refresh ON access_tokens (refresh_id);
CREATE INDEX access_tokens_expires ON access_tokens (expires_at);

-- Refresh tokens rotate on every use; all tokens of one login share a
-- family, which a reused token revokes whole.
CREATE TABLE refresh_tokens (
    id           TEXT     PRIMARY KEY,
    token_hash   BLOB     NOT NULL UNIQUE,
    family_id    TEXT     NOT NULL,
    client_id    TEXT     NOT NULL,
    subject      TEXT     NOT NULL,
    org_id       TEXT     NOT NULL,
    scopes       TEXT     NOT NULL,
    audience     TEXT     NOT NULL,
    session_id   TEXT,
    auth_time    DATETIME NOT NULL,
    amr          TEXT     NOT NULL,
    created_at   DATETIME NOT NULL,
    expires_at   DATETIME NOT NULL,
    family_expires_at DATETIME NOT NULL,
    used_at      DATETIME,
    replaced_by  TEXT,
    revoked_at   DATETIME
);
CREATE INDEX refresh_tokens_family ON refresh_tokens (family_id);
CREATE INDEX refresh_tokens_session ON refresh_tokens (session_id);

-- Authorization codes: single use, short-lived. The row stays after use
-- (used_at) so a replay can revoke what the first use issued.
CREATE TABLE auth_codes (
    id                    TEXT     PRIMARY KEY,
    code_hash             BLOB     NOT NULL UNIQUE,
    client_id             TEXT     NOT NULL,
    redirect_uri          TEXT     NOT NULL,
    subject               TEXT     NOT NULL,
    org_id                TEXT     NOT NULL,
    scopes                TEXT     NOT NULL,
    nonce                 TEXT     NOT NULL,
    code_challenge        TEXT     NOT NULL,
    session_id            TEXT     NOT NULL,
    auth_time             DATETIME NOT NULL,
    amr                   TEXT     NOT NULL,
    created_at            DATETIME NOT NULL,
    expires_at            DATETIME NOT NULL,
    used_at               DATETIME,
    issued_access_id      TEXT,
    issued_refresh_family TEXT
);

-- jti values of client assertions and JWT-profile assertions, kept until
-- the assertion expires so none is accepted twice.
CREATE TABLE assertion_jtis (
    issuer     TEXT     NOT NULL,
    jti        TEXT     NOT NULL,
    expires_at DATETIME NOT NULL,
    PRIMARY KEY (issuer, jti)
);

-- +goose Down
DROP TABLE assertion_jtis;
DROP TABLE auth_codes;
DROP TABLE refresh_tokens;
DROP TABLE access_tokens;
