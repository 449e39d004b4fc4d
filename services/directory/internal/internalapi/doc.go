// Package internalapi implements directory.v1.DirectoryService, the
// directory's internal API for authn and tokens: clients, machine keys,
// password verification under the failed-password limits (package
// lockout), password changes, user lookup by id
// and login name, claims per scope, registration, organizations and roles,
// and the organization's external IdPs with the links of users to them.
// It is served only behind the internal-credential interceptor.
package internalapi
