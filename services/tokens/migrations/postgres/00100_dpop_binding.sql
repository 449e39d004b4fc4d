-- +goose Up
-- DPoP (RFC 9449): the thumbprint (jkt) of the key an access token, or a
-- public client's refresh token, is bound to; NULL for bearer tokens.
ALTER TABLE access_tokens ADD COLUMN jkt TEXT;
ALTER TABLE refresh_tokens ADD COLUMN jkt TEXT;
-- +goose Down
ALTER TABLE refresh_tokens DROP COLUMN jkt;
ALTER TABLE access_tokens DROP COLUMN jkt;
