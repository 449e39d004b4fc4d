-- +goose Up
-- Device authorizations (RFC 8628): the device code and the user code are
-- stored only as keyed hashes. state is pending until the person decides
-- (approved, denied); an approved one is redeemed once (used_at). The
-- login fields are filled at approval.
CREATE TABLE device_codes (
    id                    TEXT     PRIMARY KEY,
    device_code_hash      BYTEA    NOT NULL UNIQUE,
    user_code_hash        BYTEA    NOT NULL UNIQUE,
    client_id             TEXT     NOT NULL,
    scopes                TEXT     NOT NULL,
    created_at            TIMESTAMPTZ NOT NULL,
    expires_at            TIMESTAMPTZ NOT NULL,
    poll_interval         INTEGER  NOT NULL,
    polls                 INTEGER  NOT NULL DEFAULT 0,
    polled_at             TIMESTAMPTZ,
    state                 TEXT     NOT NULL,
    subject               TEXT     NOT NULL DEFAULT '',
    org_id                TEXT     NOT NULL DEFAULT '',
    session_id            TEXT     NOT NULL DEFAULT '',
    auth_time             TIMESTAMPTZ,
    amr                   TEXT     NOT NULL DEFAULT '[]',
    used_at               TIMESTAMPTZ,
    issued_access_id      TEXT,
    issued_refresh_family TEXT
);
CREATE INDEX device_codes_expires ON device_codes (expires_at);
CREATE INDEX device_codes_session ON device_codes (session_id);
CREATE INDEX device_codes_subject ON device_codes (subject);
-- +goose Down
DROP TABLE device_codes;
