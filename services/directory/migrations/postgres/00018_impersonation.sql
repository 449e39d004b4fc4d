-- +goose Up
-- An organization's security policy (org.policy.security.set): whether its
-- users may be impersonated through token exchange. None: off.
CREATE TABLE security_policies (
    org_id               TEXT     PRIMARY KEY,
    enable_impersonation BOOLEAN  NOT NULL,
    creation_date        TIMESTAMPTZ NOT NULL,
    change_date          TIMESTAMPTZ NOT NULL,
    sequence             BIGINT   NOT NULL
);
-- +goose Down
DROP TABLE security_policies;
