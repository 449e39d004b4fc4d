// Package projects owns the project aggregate: projects, their applications
// (OIDC and API apps, i.e. OAuth clients) and application keys — events,
// reducers into the projects, apps and app_keys projections, commands and
// queries. Apps and keys are events of their project's aggregate (as in
// ZITADEL); an app row keeps its own details and its OIDC or API settings as
// JSON in apps.config, in OAuth vocabulary ("code", "client_secret_basic").
// Client secrets are stored as keyed hashes and shown once; of app keys only
// the public key is stored. Queries.AppByClientID is the lookup the token
// endpoint and login use. BuiltinAppCommands makes the apps Gatehouse itself
// provides, with fixed client ids (only for internal callers: the API always
// generates them). Depends on eventstore, apierr and pkg/secrets.
package projects
