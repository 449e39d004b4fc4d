-- +goose Up
-- Each signing key gets a generation number, one more than its
-- predecessor's. The unique index makes concurrent rotations by several
-- replicas create exactly one next key: the loser's insert fails and it
-- reloads. Keys that already exist are numbered in creation order.
ALTER TABLE signing_keys ADD COLUMN generation BIGINT;
UPDATE signing_keys SET generation = (
    SELECT COUNT(*) FROM signing_keys AS earlier
    WHERE earlier.created_at < signing_keys.created_at
       OR (earlier.created_at = signing_keys.created_at AND earlier.id <= signing_keys.id)
);
ALTER TABLE signing_keys ALTER COLUMN generation SET NOT NULL;
CREATE UNIQUE INDEX signing_keys_generation ON signing_keys (generation);

-- +goose Down
DROP INDEX signing_keys_generation;
ALTER TABLE signing_keys DROP COLUMN generation;
