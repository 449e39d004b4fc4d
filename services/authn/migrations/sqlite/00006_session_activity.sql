-- +goose Up
-- A session's last activity (its sign-in, or an authorization request it
-- answered) bounds its idle lifetime. Existing sessions count as last
-- active when their user last authenticated: nothing later is known of
-- them. SQLite adds a NOT NULL column only with a default; the epoch one
-- (a session that would be long expired) is overwritten at once and every
-- write sets the column.
ALTER TABLE sessions ADD COLUMN last_active_at DATETIME NOT NULL DEFAULT '1970-01-01 00:00:00+00:00';
UPDATE sessions SET last_active_at = auth_time;

-- +goose Down
ALTER TABLE sessions DROP COLUMN last_active_at;
