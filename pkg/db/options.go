package db

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/url"
	"regexp"
	"strings"
)

// Dialect names the SQL backend behind a DB.
type Dialect string

// The supported dialects. Their values are also the names of the optional
// per-dialect migration directories.
const (
	SQLite   Dialect = "sqlite"
	Postgres Dialect = "postgres"
)

// Options says where a service's data lives and how to migrate it.
type Options struct {
	// URL selects the backend: "" is SQLite under DataDir; "postgres://…"
	// or "postgresql://…" is PostgreSQL. Anything else is an error.
	URL string
	// DataDir is the directory of the SQLite file; required for SQLite.
	DataDir string
	// Service names the schema (PostgreSQL) or file (SQLite); it must match
	// [a-z][a-z0-9_]{0,62} and not be reserved (pg_*, public,
	// information_schema).
	Service string
	// Migrations holds the goose *.sql files, at the root or under a
	// directory named after the dialect ("sqlite", "postgres").
	Migrations fs.FS
	// Logger receives start-up messages (never queries or arguments);
	// nil means slog.Default().
	Logger *slog.Logger
	// MaxConns sizes the PostgreSQL pool (0: DefaultMaxConns). Every
	// connection is kept idle rather than closed, so a busy service never
	// dials per request.
	MaxConns int
	// Unlocked opens SQLite data without its lock (see ErrLocked): for
	// tests that open one file several times, standing in for replicas or
	// reading a running service's tables. A process that serves never sets
	// it.
	Unlocked bool
}

var serviceName = regexp.MustCompile(`^[a-z][a-z0-9_]{0,62}$`)

// validate checks everything that can be checked without I/O and returns
// the dialect the URL selects.
func (o *Options) validate() (Dialect, error) {
	var problems []error
	switch {
	case !serviceName.MatchString(o.Service):
		problems = append(problems, fmt.Errorf("service name %q must match [a-z][a-z0-9_]{0,62}", o.Service))
	case strings.HasPrefix(o.Service, "pg_") || o.Service == "information_schema" || o.Service == "public":
		problems = append(problems, fmt.Errorf("service name %q is reserved", o.Service))
	}
	if o.Migrations == nil {
		problems = append(problems, errors.New("migrations are required"))
	}
	d, err := dialectOf(o.URL)
	if err != nil {
		problems = append(problems, err)
	}
	if d == SQLite {
		if o.DataDir == "" {
			problems = append(problems, errors.New("data directory is required for SQLite"))
		} else if strings.ContainsRune(o.DataDir, '?') {
			// The SQLite driver splits its DSN at the first '?'.
			problems = append(problems, fmt.Errorf("data directory %q must not contain '?'", o.DataDir))
		}
	}
	if len(problems) > 0 {
		return "", fmt.Errorf("db: invalid options: %w", errors.Join(problems...))
	}
	return d, nil
}

// dialectOf picks the dialect from a database URL. Its errors never echo the
// URL, which may carry a password.
func dialectOf(rawURL string) (Dialect, error) {
	if rawURL == "" {
		return SQLite, nil
	}
	scheme, _, ok := strings.Cut(rawURL, "://")
	if !ok {
		return "", errors.New("database URL is not a URL: want postgres://… or postgresql://…, or empty for SQLite")
	}
	switch strings.ToLower(scheme) {
	case "postgres", "postgresql":
		return Postgres, nil
	}
	if !isScheme(scheme) {
		return "", errors.New("database URL has no valid scheme: want postgres://… or postgresql://…, or empty for SQLite")
	}
	return "", fmt.Errorf("database URL scheme %q is not supported: want postgres://… or postgresql://…, or empty for SQLite", scheme)
}

// isScheme reports whether s is an RFC 3986 scheme, so it is safe to echo.
func isScheme(s string) bool {
	if s == "" || len(s) > 32 {
		return false
	}
	for i, c := range s {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z':
		case i > 0 && (c >= '0' && c <= '9' || c == '+' || c == '-' || c == '.'):
		default:
			return false
		}
	}
	return true
}

var quoted = regexp.MustCompile(`"[^"]*"`)

// urlParseReason describes why url.Parse rejected a URL without repeating
// the URL or any fragment of it: a mangled URL can put its password where
// the parser quotes a port, host or escape.
func urlParseReason(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	return quoted.ReplaceAllString(err.Error(), `"…"`)
}

// secretParams are connection-URL query parameters pgx reads as secrets.
var secretParams = []string{"password", "sslpassword"}

// redactURL renders u for messages and logs with every password masked:
// the userinfo one and those passed as query parameters.
func redactURL(u *url.URL) string {
	r := *u
	if r.User != nil {
		if _, ok := r.User.Password(); ok {
			r.User = url.UserPassword(r.User.Username(), "xxxxx")
		}
	}
	q := r.Query()
	masked := false
	for _, k := range secretParams {
		if q.Has(k) {
			q.Set(k, "xxxxx")
			masked = true
		}
	}
	if masked {
		r.RawQuery = q.Encode()
	}
	return r.String()
}

// scrubSecrets masks every password of u (raw and escaped) wherever it
// appears in msg: a belt on top of the drivers' own redaction.
func scrubSecrets(msg string, u *url.URL) string {
	var secrets []string
	if u.User != nil {
		if pw, ok := u.User.Password(); ok {
			secrets = append(secrets, pw)
		}
	}
	q := u.Query()
	for _, k := range secretParams {
		secrets = append(secrets, q[k]...)
	}
	for _, s := range secrets {
		if s == "" {
			continue
		}
		for _, form := range []string{s, url.QueryEscape(s), url.PathEscape(s)} {
			msg = strings.ReplaceAll(msg, form, "xxxxx")
		}
	}
	return msg
}
