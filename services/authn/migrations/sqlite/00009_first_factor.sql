-- +goose Up
-- A pending request whose user passed the first factor and now owes a
-- second one (package login, mfa.go): the user, the methods used so far
-- and, once the second factor is passed too, that it is (JSON).
ALTER TABLE auth_requests ADD COLUMN first_factor TEXT NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE auth_requests DROP COLUMN first_factor;
