// Package idps owns the external identity provider aggregate (OIDC IdPs of
// an organization): events, reducers into the idps projection, commands and
// queries. Client secrets are encrypted at rest with the master key
// (secrets.Cipher for secrets.PurposeIdPSecrets, the IdP id as additional
// data), in the projection and in the event payloads alike, and are never
// returned by the API; Secrets.ClientSecret opens one for the federation
// flow. It depends on the event store, pkg/db and pkg/secrets; input
// validation of the API lives in the management handlers, with the issuer
// and scope rules here (IssuerProblem, ScopeProblem).
package idps
