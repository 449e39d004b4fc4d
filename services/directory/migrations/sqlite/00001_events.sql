-- +goose Up
-- The event store: every change to the directory is one row, appended in the
-- transaction that updates the projections. (aggregate_id, aggregate_version)
-- is unique, which is the optimistic-concurrency check.
CREATE TABLE events (
    sequence          INTEGER PRIMARY KEY AUTOINCREMENT,
    aggregate_type    TEXT     NOT NULL,
    aggregate_id      TEXT     NOT NULL,
    aggregate_version BIGINT   NOT NULL,
    event_type        TEXT     NOT NULL,
    payload           TEXT     NOT NULL,
    resource_owner    TEXT     NOT NULL,
    editor            TEXT     NOT NULL,
    created_at        DATETIME NOT NULL,
    UNIQUE (aggregate_id, aggregate_version)
);
CREATE INDEX events_resource_owner ON events (resource_owner, sequence);

-- +goose Down
DROP TABLE events;
