package bootstrap

// Internals for the external tests: the first-start steps alone (what
// versions before the ensure steps did), the CLI app's marker and its
// definition.
var (
	FirstStart = firstStart
	CLIApp     = cliApp
)

const EventCLIAppEnsured = eventCLIAppEnsured
