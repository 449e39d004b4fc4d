// Package metadata owns user metadata (key/value pairs on the user
// aggregate): events, reducers into the user_metadata projection, commands
// and queries.
package metadata
