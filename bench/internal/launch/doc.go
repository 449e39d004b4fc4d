// Package launch runs Gatehouse's built binaries as child processes for a
// benchmark: the embedded server (bin/edge alone, SQLite in a fresh data
// directory) or the distributed deployment (bin/directory, bin/tokens,
// bin/authn and bin/edge on free loopback ports, sharing a fresh PostgreSQL
// database and a Redis database). It creates and drops that PostgreSQL
// database, deletes the gatehouse:* Redis keys the run created, and stops
// every child it started. Backends must be on loopback addresses. It
// depends on pgx, go-redis and package procstat.
package launch
