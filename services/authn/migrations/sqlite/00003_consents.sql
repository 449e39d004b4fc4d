-- +goose Up
-- Consents of users of a granted organization to an application, per
-- scope set (space-separated, sorted): one covers any request whose scopes
-- it contains. Kept until the user or an admin removes them.
CREATE TABLE consents (
    user_id    TEXT     NOT NULL,
    client_id  TEXT     NOT NULL,
    scopes     TEXT     NOT NULL,
    created_at DATETIME NOT NULL,
    PRIMARY KEY (user_id, client_id, scopes)
);

-- +goose Down
DROP TABLE consents;
