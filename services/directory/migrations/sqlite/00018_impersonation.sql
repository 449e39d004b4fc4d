-- +goose Up
-- An organization's security policy (org.policy.security.set): whether its
-- users may be impersonated through token exchange. None: off.
CREATE TABLE security_policies (
    org_id               TEXT     PRIMARY KEY,
    enable_impersonation BOOLEAN  NOT NULL,
    creation_date        DATETIME NOT NULL,
    change_date          DATETIME NOT NULL,
    sequence             BIGINT   NOT NULL
);
-- The impersonation right of an organization withdrawn (the policy turned
-- off, a member holding ORG_END_USER_IMPERSONATOR removed): an outbox, as
-- grant_cutoffs, delivered to the tokens service, which revokes the
-- tokens impersonations issued for the organization's users up to then.
CREATE TABLE impersonation_cutoffs (
    org_id    TEXT PRIMARY KEY,
    not_after DATETIME NOT NULL
);
-- +goose Down
DROP TABLE impersonation_cutoffs;
DROP TABLE security_policies;
