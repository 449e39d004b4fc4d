// Package logging builds the process logger: log/slog, JSON when stderr is not
// a terminal, text when it is. Attributes whose key names a secret (password,
// token, secret, assertion, authorization, code, cookie, key material) are
// redacted whatever their value, so a careless log call cannot leak one.
// Records carry the trace and span ids of the context they are logged with.
package logging
