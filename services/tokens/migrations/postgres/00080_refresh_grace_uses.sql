-- +goose Up
-- How many siblings a rotated refresh token has been redeemed for within
-- the reuse grace (lifecycle.MaxRedemptions bounds it); the default keeps
-- existing rows as they were, without rewriting the table.
ALTER TABLE refresh_tokens ADD COLUMN grace_uses INTEGER NOT NULL DEFAULT 0;
-- +goose Down
ALTER TABLE refresh_tokens DROP COLUMN grace_uses;
