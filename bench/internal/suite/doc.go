// Package suite is the benchmark's scenario code: it prepares clients on a
// running Gatehouse through its public APIs (the bootstrap key file, the
// JWT profile grant, the management API) and measures each scenario, under
// a stable name (Names) — client_credentials with JWT (per algorithm) and
// opaque access tokens, introspection of each, the key set, and a whole
// browser login (authorization code flow with PKCE through the login
// pages) — as throughput, latency, server CPU per request by process and
// memory. It depends on package load for the requests and on
// caller-supplied CPU and memory readings of the server process(es).
package suite
