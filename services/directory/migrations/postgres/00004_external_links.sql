-- +goose Up
-- Links of users to their identities at external identity providers: the
-- user.idp.link.* events of the user aggregate. An external identity (IdP,
-- subject) belongs to at most one user, and a user has at most one identity
-- per IdP. Removing the user or the IdP removes its links (the reducers
-- delete them explicitly; the cascades are a second line).
CREATE TABLE user_links (
    idp_id           TEXT     NOT NULL REFERENCES idps (id) ON DELETE CASCADE,
    external_subject TEXT     NOT NULL,
    user_id          TEXT     NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    org_id           TEXT     NOT NULL,
    creation_date    TIMESTAMPTZ NOT NULL,
    change_date      TIMESTAMPTZ NOT NULL,
    sequence         BIGINT   NOT NULL,
    PRIMARY KEY (idp_id, external_subject),
    UNIQUE (user_id, idp_id)
);

-- +goose Down
DROP TABLE user_links;
