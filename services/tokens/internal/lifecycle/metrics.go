package lifecycle

import "github.com/gatehouse-id/gatehouse/pkg/telemetry"

// Replays and reuses, which are either clients racing or stolen tokens.
var (
	reuses = telemetry.MustCounter("gatehouse.tokens.refresh_reuse",
		"Rotated refresh tokens presented again, by outcome: grace (a confidential client's sibling within the grace, served) or family_revoked.", "outcome")
	codeReplays = telemetry.MustCounter("gatehouse.tokens.code_replays",
		"Authorization codes presented again; what their first use issued is revoked.")
)
