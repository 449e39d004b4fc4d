-- +goose Up
-- Pushed authorization requests (RFC 9126): the validated parameters of a
-- client's request, named by a request_uri stored only as its SHA-256,
-- used once within a minute.
CREATE TABLE pushed_requests (
    uri_hash   BLOB    PRIMARY KEY,
    client_id  TEXT     NOT NULL,
    params     TEXT     NOT NULL,
    created_at DATETIME NOT NULL,
    expires_at DATETIME NOT NULL
);
CREATE INDEX pushed_requests_expires ON pushed_requests (expires_at);
-- +goose Down
DROP TABLE pushed_requests;
