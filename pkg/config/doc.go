// Package config loads and validates the GATEHOUSE_* environment variables.
// The common core (addresses, issuer, database, Redis, telemetry, internal
// credential, master key) is Config; each service reads its own section
// (a Section: the tokens service's signing and lifetimes, authn's
// sessions, directory's first start, edge's rate limits, IdPEgress for the
// two that reach identity providers and for tokens' back-channel logouts),
// so a process reads only the
// variables of the services it runs. Load reports every problem at once,
// each naming its variable, so a misconfigured process stops before it
// starts anything (main exits with status 2).
package config
