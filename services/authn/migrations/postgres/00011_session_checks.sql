-- +goose Up
-- When each kind of check of a session last passed (package session,
-- Checks as JSON): the login policy's check lifetimes re-run a check
-- older than its lifetime. Empty for sessions from before: their
-- auth_time stands in.
ALTER TABLE sessions ADD COLUMN checks TEXT NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE sessions DROP COLUMN checks;
