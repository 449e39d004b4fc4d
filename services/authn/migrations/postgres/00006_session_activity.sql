-- +goose Up
-- A session's last activity (its sign-in, or an authorization request it
-- answered) bounds its idle lifetime. Existing sessions count as last
-- active when their user last authenticated: nothing later is known of
-- them.
ALTER TABLE sessions ADD COLUMN last_active_at TIMESTAMPTZ;
UPDATE sessions SET last_active_at = auth_time;
ALTER TABLE sessions ALTER COLUMN last_active_at SET NOT NULL;

-- +goose Down
ALTER TABLE sessions DROP COLUMN last_active_at;
