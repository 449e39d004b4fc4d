-- +goose Up
-- An identity an external provider asserted that no user is linked to yet
-- waits with its pending request (JSON), until the user links it to an
-- existing account or registers one.
ALTER TABLE auth_requests ADD COLUMN external TEXT NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE auth_requests DROP COLUMN external;
