//go:build tools

// Package mailpit pins the SMTP test server of the e2e mail tests
// (github.com/axllent/mailpit) in a module of its own, outside go.work, so
// that its dependencies never raise the services' versions. Build it with
// `make mailpit` (bin/mailpit).
package mailpit

import _ "github.com/axllent/mailpit"
