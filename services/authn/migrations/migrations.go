// Package migrations embeds the authn service's versioned SQL migrations
// (goose format), applied by db.Open at start. Files under sqlite/ or
// postgres/ are dialect-specific.
package migrations

import "embed"

// FS holds the migration files.
//
//go:embed sqlite postgres
var FS embed.FS
