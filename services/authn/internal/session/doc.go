// Package session owns authn's storage: user agents (one per browser,
// identified by an opaque cookie whose SHA-256 is the row id), the sessions
// of the users signed in on each browser, and the authorization requests
// pending while a user signs in. It also reads and writes the user-agent
// cookie. A session is live only within its idle and absolute lifetimes
// (Lifetimes, applied in one place); Store.Sessions is the one way to read
// sessions, and separates the live ones from the expired ones. It depends
// only on pkg/db.
package session
