// Package projects owns the project aggregate: projects, their applications
// (OIDC and API apps, i.e. OAuth clients) and application keys — events,
// reducers into the projects, apps and app_keys projections, commands and
// queries. Client secrets are stored as keyed hashes and shown once.
package projects
