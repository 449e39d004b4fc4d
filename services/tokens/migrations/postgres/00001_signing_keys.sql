-- +goose Up
-- Signing keys. A key is published in the key set from created_at, signs
-- only from sign_from (after every replica and cache has seen it), stops
-- signing at retire_at and leaves the key set at expires_at, when every
-- token it signed has expired. Private keys are encrypted with the master key.
CREATE TABLE signing_keys (
    id          TEXT     PRIMARY KEY,
    algorithm   TEXT     NOT NULL,
    private_key BYTEA    NOT NULL,
    public_jwk  TEXT     NOT NULL,
    created_at  TIMESTAMPTZ NOT NULL,
    sign_from   TIMESTAMPTZ NOT NULL,
    retire_at   TIMESTAMPTZ,
    expires_at  TIMESTAMPTZ
);

-- +goose Down
DROP TABLE signing_keys;
