-- +goose Up
-- The outbox of project grant removals, as user_token_cutoffs is of users'
-- cut-offs: written in the removal's transaction, delivered to the tokens
-- service (RevokeGrantTokens: what the project's clients hold for users of
-- the organization, issued up to not_after), deleted once it took it.
CREATE TABLE grant_cutoffs (
    project_id TEXT NOT NULL,
    org_id     TEXT NOT NULL,
    not_after  TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (project_id, org_id)
);

-- +goose Down
DROP TABLE grant_cutoffs;
