// Package suite is the benchmark's scenario code: it prepares clients on a
// running Gatehouse through its public APIs (the bootstrap key file, the
// JWT profile grant, the management API) and measures each scenario —
// client_credentials with JWT and opaque access tokens, JWT introspection,
// the key set — as throughput, latency and server CPU per request. It
// depends on package load for the requests and on a caller-supplied CPU
// reading for the server process(es).
package suite
