-- +goose Up
-- One-time data repairs that SQL cannot express (they run in Go at start,
-- see users.RepairNormalizedNames); a row says one is done.
CREATE TABLE repairs (
    name    TEXT PRIMARY KEY,
    done_at TIMESTAMPTZ NOT NULL
);

-- +goose Down
DROP TABLE repairs;
