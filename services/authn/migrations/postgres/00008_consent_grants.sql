-- +goose Up
-- A consent holds for the project grant it was given under: a grant
-- removed and made again is another grant, and the user is asked again.
-- Consents given before this column existed name no grant and count for
-- none (each user of a granted organization consents once more).
ALTER TABLE consents ADD COLUMN grant_id TEXT NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE consents DROP COLUMN grant_id;
