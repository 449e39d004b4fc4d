-- +goose Up
-- Names unique where ZITADEL makes them unique: IdPs and projects within an
-- organization, applications within a project.
CREATE UNIQUE INDEX idps_org_name ON idps (org_id, name);
CREATE UNIQUE INDEX projects_org_name ON projects (org_id, name);
CREATE UNIQUE INDEX apps_project_name ON apps (project_id, name);

-- +goose Down
DROP INDEX apps_project_name;
DROP INDEX projects_org_name;
DROP INDEX idps_org_name;
