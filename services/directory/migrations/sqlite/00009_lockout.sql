-- +goose Up
-- The account each failure counter belongs to, so UnlockUser forgets a
-- user's counters with every address at once; rows of the per-user lock
-- before this migration belong to that user.
ALTER TABLE login_failures ADD COLUMN account TEXT;
UPDATE login_failures SET account = subject WHERE subject LIKE 'user:%';
CREATE INDEX login_failures_account ON login_failures (account);
-- The prune deletes by age.
CREATE INDEX login_failures_updated ON login_failures (updated_at);
-- The per-account lock is now an organization's opt-in (0: off), the
-- progressive delay per (account, address) the default. 5 is the only
-- value ever stored: the old default, which no API could change.
UPDATE orgs SET lockout_max_attempts = 0 WHERE lockout_max_attempts = 5;

-- +goose Down
UPDATE orgs SET lockout_max_attempts = 5 WHERE lockout_max_attempts = 0;
DROP INDEX login_failures_updated;
DROP INDEX login_failures_account;
ALTER TABLE login_failures DROP COLUMN account;
