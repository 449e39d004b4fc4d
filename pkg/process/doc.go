// Package process is the common main of every Gatehouse binary: load and
// validate configuration (exit 2 with one line on error), build the logger and
// telemetry, let the caller assemble its component, serve it with health and
// metrics endpoints, and shut down gracefully on SIGTERM or SIGINT.
package process
