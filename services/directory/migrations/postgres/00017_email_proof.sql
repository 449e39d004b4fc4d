-- +goose Up
-- Domains of organizations (package orgs, domains.go). An organization
-- proves a domain by an HTTP file or a DNS TXT record; a domain is
-- verified by at most one organization. Each organization's generated
-- primary domain (a name under the issuer's host) is the instance's and
-- counts as verified.
CREATE TABLE org_domains (
    org_id          TEXT     NOT NULL,
    domain          TEXT     NOT NULL,
    verified        BOOLEAN  NOT NULL DEFAULT FALSE,
    is_primary      BOOLEAN  NOT NULL DEFAULT FALSE,
    validation_type INTEGER  NOT NULL DEFAULT 0,
    validation_code TEXT     NOT NULL DEFAULT '',
    creation_date   TIMESTAMPTZ NOT NULL,
    change_date     TIMESTAMPTZ NOT NULL,
    sequence        BIGINT   NOT NULL DEFAULT 0,
    PRIMARY KEY (org_id, domain)
);
CREATE UNIQUE INDEX org_domains_verified ON org_domains (domain) WHERE verified;
INSERT INTO org_domains (org_id, domain, verified, is_primary, creation_date, change_date, sequence)
SELECT id, primary_domain, TRUE, TRUE, creation_date, creation_date, 0 FROM orgs;

-- email_proven: the user proved control of the address (a code, a link,
-- a provider's assertion) or an IAM owner marked it verified. An address
-- only marked verified by an organization admin counts as verified when
-- its domain (email_domain) is one the organization verified.
ALTER TABLE users ADD COLUMN email_proven BOOLEAN NOT NULL DEFAULT FALSE;
ALTER TABLE users ADD COLUMN email_domain TEXT NOT NULL DEFAULT '';
UPDATE users SET email_domain = LOWER(SUBSTRING(email FROM POSITION('@' IN email) + 1)) WHERE POSITION('@' IN email) > 0;

-- mailed: the code went to the address by mail (only then does using it
-- prove control of the address; a code returned to an admin does not).
ALTER TABLE user_codes ADD COLUMN mailed BOOLEAN NOT NULL DEFAULT FALSE;

-- The mail throttle counts messages per address, too.
CREATE INDEX mail_outbox_recipient ON mail_outbox (LOWER(recipient), kind, created_at);

-- +goose Down
DROP INDEX mail_outbox_recipient;
ALTER TABLE user_codes DROP COLUMN mailed;
ALTER TABLE users DROP COLUMN email_domain;
ALTER TABLE users DROP COLUMN email_proven;
DROP TABLE org_domains;
