-- +goose Up
-- Projections of the event store, updated by reducers in the transaction
-- that appends the events. Every projected object records the details of
-- its events: creation_date (first event), change_date and sequence (last
-- event reduced). Aggregate roots also record version, the optimistic
-- concurrency token for the next write. List-valued columns hold JSON.

CREATE TABLE instance_members (
    user_id       TEXT     PRIMARY KEY,
    roles         TEXT     NOT NULL,
    creation_date TIMESTAMPTZ NOT NULL,
    change_date   TIMESTAMPTZ NOT NULL,
    sequence      BIGINT   NOT NULL
);

CREATE TABLE orgs (
    id                TEXT     PRIMARY KEY,
    name              TEXT     NOT NULL,
    primary_domain    TEXT     NOT NULL UNIQUE,
    state             INTEGER  NOT NULL,
    pw_min_length     INTEGER  NOT NULL,
    pw_has_uppercase  BOOLEAN  NOT NULL,
    pw_has_lowercase  BOOLEAN  NOT NULL,
    pw_has_number     BOOLEAN  NOT NULL,
    pw_has_symbol     BOOLEAN  NOT NULL,
    pw_history        INTEGER  NOT NULL,
    lockout_max_attempts INTEGER NOT NULL,
    creation_date     TIMESTAMPTZ NOT NULL,
    change_date       TIMESTAMPTZ NOT NULL,
    sequence          BIGINT   NOT NULL,
    version           BIGINT   NOT NULL
);
CREATE UNIQUE INDEX orgs_name ON orgs (name);

CREATE TABLE org_members (
    org_id        TEXT     NOT NULL REFERENCES orgs (id) ON DELETE CASCADE,
    user_id       TEXT     NOT NULL,
    roles         TEXT     NOT NULL,
    creation_date TIMESTAMPTZ NOT NULL,
    change_date   TIMESTAMPTZ NOT NULL,
    sequence      BIGINT   NOT NULL,
    PRIMARY KEY (org_id, user_id)
);
CREATE INDEX org_members_user ON org_members (user_id);

CREATE TABLE users (
    id                       TEXT     PRIMARY KEY,
    org_id                   TEXT     NOT NULL REFERENCES orgs (id),
    type                     INTEGER  NOT NULL,
    user_name                TEXT     NOT NULL,
    state                    INTEGER  NOT NULL,
    first_name               TEXT     NOT NULL,
    last_name                TEXT     NOT NULL,
    nick_name                TEXT     NOT NULL,
    display_name             TEXT     NOT NULL,
    preferred_language       TEXT     NOT NULL,
    gender                   INTEGER  NOT NULL,
    email                    TEXT     NOT NULL,
    email_verified           BOOLEAN  NOT NULL,
    phone                    TEXT     NOT NULL,
    phone_verified           BOOLEAN  NOT NULL,
    password_hash            TEXT     NOT NULL,
    password_change_required BOOLEAN  NOT NULL,
    password_changed         TIMESTAMPTZ,
    machine_name             TEXT     NOT NULL,
    machine_description      TEXT     NOT NULL,
    access_token_type        INTEGER  NOT NULL,
    client_id                TEXT,
    secret_hash              BYTEA,
    creation_date            TIMESTAMPTZ NOT NULL,
    change_date              TIMESTAMPTZ NOT NULL,
    sequence                 BIGINT   NOT NULL,
    version                  BIGINT   NOT NULL,
    UNIQUE (org_id, user_name)
);
CREATE UNIQUE INDEX users_client_id ON users (client_id);
CREATE INDEX users_org_email ON users (org_id, email);

-- Hashes of a user's previous passwords, for the "not in the last N" rule.
CREATE TABLE password_history (
    user_id       TEXT     NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    sequence      BIGINT   NOT NULL,
    password_hash TEXT     NOT NULL,
    PRIMARY KEY (user_id, sequence)
);

CREATE TABLE user_metadata (
    user_id       TEXT     NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    key           TEXT     NOT NULL,
    value         BYTEA     NOT NULL,
    org_id        TEXT     NOT NULL,
    creation_date TIMESTAMPTZ NOT NULL,
    change_date   TIMESTAMPTZ NOT NULL,
    sequence      BIGINT   NOT NULL,
    PRIMARY KEY (user_id, key)
);

CREATE TABLE machine_keys (
    id              TEXT     PRIMARY KEY,
    user_id         TEXT     NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    org_id          TEXT     NOT NULL,
    type            INTEGER  NOT NULL,
    public_key      TEXT     NOT NULL,
    expiration_date TIMESTAMPTZ,
    creation_date   TIMESTAMPTZ NOT NULL,
    change_date     TIMESTAMPTZ NOT NULL,
    sequence        BIGINT   NOT NULL
);
CREATE INDEX machine_keys_user ON machine_keys (user_id);

CREATE TABLE idps (
    id                   TEXT     PRIMARY KEY,
    org_id               TEXT     NOT NULL REFERENCES orgs (id),
    name                 TEXT     NOT NULL,
    styling_type         INTEGER  NOT NULL,
    state                INTEGER  NOT NULL,
    client_id            TEXT     NOT NULL,
    client_secret        BYTEA     NOT NULL,
    issuer               TEXT     NOT NULL,
    scopes               TEXT     NOT NULL,
    display_name_mapping INTEGER  NOT NULL,
    username_mapping     INTEGER  NOT NULL,
    auto_register        BOOLEAN  NOT NULL,
    creation_date        TIMESTAMPTZ NOT NULL,
    change_date          TIMESTAMPTZ NOT NULL,
    sequence             BIGINT   NOT NULL,
    version              BIGINT   NOT NULL
);
CREATE INDEX idps_org ON idps (org_id);

CREATE TABLE projects (
    id                       TEXT     PRIMARY KEY,
    org_id                   TEXT     NOT NULL REFERENCES orgs (id),
    name                     TEXT     NOT NULL,
    state                    INTEGER  NOT NULL,
    project_role_assertion   BOOLEAN  NOT NULL,
    project_role_check       BOOLEAN  NOT NULL,
    has_project_check        BOOLEAN  NOT NULL,
    private_labeling_setting INTEGER  NOT NULL,
    creation_date            TIMESTAMPTZ NOT NULL,
    change_date              TIMESTAMPTZ NOT NULL,
    sequence                 BIGINT   NOT NULL,
    version                  BIGINT   NOT NULL
);
CREATE INDEX projects_org ON projects (org_id);

CREATE TABLE apps (
    id                           TEXT     PRIMARY KEY,
    project_id                   TEXT     NOT NULL REFERENCES projects (id) ON DELETE CASCADE,
    org_id                       TEXT     NOT NULL,
    name                         TEXT     NOT NULL,
    state                        INTEGER  NOT NULL,
    kind                         INTEGER  NOT NULL,
    client_id                    TEXT     NOT NULL UNIQUE,
    secret_hash                  BYTEA,
    config                       TEXT     NOT NULL,
    creation_date                TIMESTAMPTZ NOT NULL,
    change_date                  TIMESTAMPTZ NOT NULL,
    sequence                     BIGINT   NOT NULL
);
CREATE INDEX apps_project ON apps (project_id);

CREATE TABLE app_keys (
    id              TEXT     PRIMARY KEY,
    app_id          TEXT     NOT NULL REFERENCES apps (id) ON DELETE CASCADE,
    project_id      TEXT     NOT NULL,
    org_id          TEXT     NOT NULL,
    type            INTEGER  NOT NULL,
    public_key      TEXT     NOT NULL,
    expiration_date TIMESTAMPTZ,
    creation_date   TIMESTAMPTZ NOT NULL,
    change_date     TIMESTAMPTZ NOT NULL,
    sequence        BIGINT   NOT NULL
);
CREATE INDEX app_keys_app ON app_keys (app_id);

-- Failed password checks, per user and per client address; not events
-- (they are not changes of the directory) but durable so a lockout survives
-- restarts.
CREATE TABLE login_failures (
    subject      TEXT     PRIMARY KEY,
    failures     INTEGER  NOT NULL,
    locked_until TIMESTAMPTZ,
    updated_at   TIMESTAMPTZ NOT NULL
);

-- +goose Down
DROP TABLE login_failures;
DROP TABLE app_keys;
DROP TABLE apps;
DROP TABLE projects;
DROP TABLE idps;
DROP TABLE machine_keys;
DROP TABLE user_metadata;
DROP TABLE password_history;
DROP TABLE users;
DROP TABLE org_members;
DROP TABLE orgs;
DROP TABLE instance_members;
