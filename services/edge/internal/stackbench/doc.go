// Package stackbench benchmarks the embedded server's hot paths in-process
// through the full handler stack the edge process serves — process-level
// tracing middleware, edge's router (request id, access log, security
// headers, body limit) and the embedded tokens and directory services on
// SQLite — without sockets, so `go test -bench . -cpuprofile` shows where
// Gatehouse's own CPU goes. Clients are created through the public APIs,
// as `make bench` does. It holds only tests and benchmarks.
package stackbench
