-- +goose Up
-- The user name the identity provider gave when the link was made
-- (ListUserIDPs' providedUserName).
ALTER TABLE user_links ADD COLUMN external_user_name TEXT NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE user_links DROP COLUMN external_user_name;
