-- +goose Up
-- A human user's authentication factors besides the password (package
-- users, factors.go): one TOTP generator (type otp), security keys (u2f)
-- and passkeys (passwordless). state: 1 not ready (registration started),
-- 2 ready. secret: the TOTP seed sealed with the master key. last_step:
-- the last TOTP time step accepted, so a code is accepted at most once.
-- started_by: who started the registration (a login's enrollment resumes
-- only the user's own, never one whose secret an admin was shown).
CREATE TABLE user_factors (
    id            TEXT        PRIMARY KEY,
    user_id       TEXT        NOT NULL,
    org_id        TEXT        NOT NULL,
    type          TEXT        NOT NULL,
    state         INTEGER     NOT NULL,
    name          TEXT        NOT NULL DEFAULT '',
    secret        BLOB,
    last_step     BIGINT      NOT NULL DEFAULT 0,
    started_by    TEXT        NOT NULL DEFAULT '',
    creation_date DATETIME    NOT NULL,
    change_date   DATETIME    NOT NULL,
    sequence      BIGINT      NOT NULL
);
CREATE INDEX user_factors_user ON user_factors (user_id);
-- Recovery codes: keyed hashes only, each usable once.
CREATE TABLE recovery_codes (
    user_id TEXT    NOT NULL,
    idx     INTEGER NOT NULL,
    hash    BLOB   NOT NULL,
    used    BOOLEAN NOT NULL DEFAULT FALSE,
    PRIMARY KEY (user_id, idx)
);

-- +goose Down
DROP TABLE recovery_codes;
DROP TABLE user_factors;
