-- +goose Up
-- Project grants (project.grant.* events of the project aggregate): the
-- granted organization's users may sign in to the project's applications.
CREATE TABLE project_grants (
    id             TEXT     PRIMARY KEY,
    project_id     TEXT     NOT NULL REFERENCES projects (id) ON DELETE CASCADE,
    org_id         TEXT     NOT NULL,
    granted_org_id TEXT     NOT NULL,
    role_keys      TEXT     NOT NULL,
    state          INTEGER  NOT NULL,
    creation_date  DATETIME NOT NULL,
    change_date    DATETIME NOT NULL,
    sequence       BIGINT   NOT NULL,
    UNIQUE (project_id, granted_org_id)
);

-- Organizations' own login policies (org.policy.login.* events); an
-- organization without a row uses the instance default.
CREATE TABLE login_policies (
    org_id        TEXT     PRIMARY KEY REFERENCES orgs (id) ON DELETE CASCADE,
    policy        TEXT     NOT NULL,
    creation_date DATETIME NOT NULL,
    change_date   DATETIME NOT NULL,
    sequence      BIGINT   NOT NULL
);

-- +goose Down
DROP TABLE login_policies;
DROP TABLE project_grants;
