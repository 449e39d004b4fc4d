-- +goose Up
-- The account page lists a user's sessions across browsers.
CREATE INDEX sessions_user_id ON sessions (user_id);

-- +goose Down
DROP INDEX sessions_user_id;
