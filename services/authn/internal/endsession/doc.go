// Package endsession owns /oidc/v1/end_session (OpenID Connect RP-Initiated
// Logout 1.0): it verifies the id_token_hint through the tokens service
// (an expired hint is accepted), checks post_logout_redirect_uri against
// the client's registered URIs, ends the browser's sessions and revokes
// their tokens (tokens RevokeSession), then redirects or shows the
// logged-out page. Without an id_token_hint the relying party is unknown,
// so a browser holding sessions first gets a confirmation page whose
// CSRF-protected POST does the logout. It depends on package session, the directory (the
// client) and the tokens service.
package endsession
