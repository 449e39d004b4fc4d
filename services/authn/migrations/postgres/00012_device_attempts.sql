-- +goose Up
-- Wrong user codes typed at /device, per browser (its cookie's id), in a
-- window that starts with the first one: the device flow's pages stop a
-- browser guessing codes (RFC 8628 §5.1); edge bounds the address.
CREATE TABLE device_attempts (
    user_agent_id TEXT     PRIMARY KEY,
    failures      INTEGER  NOT NULL,
    window_start  TIMESTAMPTZ NOT NULL
);
CREATE INDEX device_attempts_window ON device_attempts (window_start);
-- +goose Down
DROP TABLE device_attempts;
