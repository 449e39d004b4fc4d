// Package apierror writes the small JSON error bodies edge itself answers
// with (404, 413, 429, 503, 500) in the OAuth error shape
// {"error": ..., "error_description": ...}, which fits the OIDC endpoints and
// is readable for every other client. It depends on nothing else in edge.
package apierror
