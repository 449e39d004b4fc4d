//go:build tools

// Package oauth2proxy pins oauth2-proxy (github.com/oauth2-proxy/oauth2-proxy),
// the relying party of the e2e test that signs in with a verified address
// under its default email_verified requirement, in a module of its own,
// outside go.work, so that its dependencies never raise the services'
// versions. Build it with `make oauth2-proxy` (bin/oauth2-proxy).
package oauth2proxy

import _ "github.com/oauth2-proxy/oauth2-proxy/v7"
