-- +goose Up
-- A verified e-mail address belongs to at most one user per organization:
-- relying parties key on it, and a sign-in by e-mail must find one user.
-- Where several users already share one, the oldest keeps it verified and
-- the others are marked unverified (they verify it again, or not).
UPDATE users SET email_verified = FALSE
WHERE email_verified AND EXISTS (
    SELECT 1 FROM users o
    WHERE o.org_id = users.org_id AND o.email_verified AND LOWER(o.email) = LOWER(users.email) AND o.id <> users.id
      AND (o.creation_date < users.creation_date OR (o.creation_date = users.creation_date AND o.id < users.id)));
CREATE UNIQUE INDEX users_verified_email ON users (org_id, LOWER(email)) WHERE email_verified AND email <> '';

-- +goose Down
DROP INDEX users_verified_email;
