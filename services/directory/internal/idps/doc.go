// Package idps owns the external identity provider aggregate (OIDC IdPs of
// an organization): events, reducers into the idps projection, commands and
// queries. Client secrets are encrypted at rest with the master key and
// never returned.
package idps
