-- +goose Up
-- Admin clients: apps an IAM owner marked (project.application.admin_client.set).
ALTER TABLE apps ADD COLUMN admin_client BOOLEAN NOT NULL DEFAULT FALSE;

-- User names are unique per organization after normalisation (NFKC and
-- Unicode case folding, users.NormalizeName), and logins look them up by
-- that form. Names stored before keep the lower-cased form; where two
-- already clash, the older user keeps the name and the newer one (NULL,
-- which never matches) can no longer sign in by it until renamed.
ALTER TABLE users ADD COLUMN user_name_norm TEXT;
UPDATE users SET user_name_norm = LOWER(user_name) WHERE NOT EXISTS (
    SELECT 1 FROM users o WHERE o.org_id = users.org_id AND LOWER(o.user_name) = LOWER(users.user_name)
      AND (o.creation_date < users.creation_date OR (o.creation_date = users.creation_date AND o.id < users.id)));
CREATE UNIQUE INDEX users_org_name_norm ON users (org_id, user_name_norm);

-- Sessions authenticated at or before this instant are ended (deactivation,
-- an admin password reset).
ALTER TABLE users ADD COLUMN sessions_not_before TIMESTAMPTZ;

-- Outbox of token cut-offs for the tokens service (RevokeUserTokens):
-- written in the transaction of the event that requires it, deleted once
-- the tokens service has recorded it.
CREATE TABLE user_token_cutoffs (
    user_id   TEXT PRIMARY KEY,
    not_after TIMESTAMPTZ NOT NULL
);

-- +goose Down
DROP TABLE user_token_cutoffs;
ALTER TABLE users DROP COLUMN sessions_not_before;
DROP INDEX users_org_name_norm;
ALTER TABLE users DROP COLUMN user_name_norm;
ALTER TABLE apps DROP COLUMN admin_client;
