// Package pkg is the root of Gatehouse's shared module: configuration, logging,
// storage, telemetry, server plumbing and generated API code used by every service.
package pkg
