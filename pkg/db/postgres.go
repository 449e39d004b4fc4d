package db

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"hash/fnv"
	"net/url"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/stdlib"
)

// DefaultMaxConns is a service's PostgreSQL pool size per process: enough
// for a replica's concurrent requests without exhausting a shared server's
// max_connections.
const DefaultMaxConns = 20

// Every open connection may stay idle (database/sql keeps 2 by default,
// so a burst above that closed and re-dialled connections: 167 new
// PostgreSQL connections in 10 s at 16 concurrent requests). Idle ones
// close after pgConnMaxIdleTime, and every one after pgConnMaxLifetime so
// the pool follows a failover or a DNS change.
const (
	pgConnMaxLifetime = 30 * time.Minute
	pgConnMaxIdleTime = 5 * time.Minute
)

// openPostgres connects with search_path set to the service's schema on
// every connection, pings, and creates the schema if it is missing. It
// returns the pool and the redacted URL for messages.
func openPostgres(ctx context.Context, rawURL, schema string, maxConns int) (*sql.DB, string, error) {
	// pgx only recognises lower-case schemes.
	if scheme, rest, ok := strings.Cut(rawURL, "://"); ok {
		rawURL = strings.ToLower(scheme) + "://" + rest
	}
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, "", fmt.Errorf("db: malformed PostgreSQL URL: %s", urlParseReason(err))
	}
	where := redactURL(u)
	cfg, err := pgx.ParseConfig(rawURL)
	if err != nil {
		// Not %w: pgconn.ParseConfigError keeps the raw URL, password included.
		return nil, "", fmt.Errorf("db: invalid PostgreSQL URL %s: %s", where, scrubSecrets(err.Error(), u))
	}
	if cfg.RuntimeParams == nil {
		cfg.RuntimeParams = map[string]string{}
	}
	cfg.RuntimeParams["search_path"] = schema
	// A fixed session time zone makes timestamptz text output and
	// timestamp casts the same on every replica.
	cfg.RuntimeParams["timezone"] = "UTC"
	// Operators see which service holds a connection (pg_stat_activity);
	// one set in the URL wins.
	if cfg.RuntimeParams["application_name"] == "" {
		cfg.RuntimeParams["application_name"] = "gatehouse-" + schema
	}

	sqldb := stdlib.OpenDB(*cfg, stdlib.OptionAfterConnect(scanTimesInUTC))
	if maxConns <= 0 {
		maxConns = DefaultMaxConns
	}
	sqldb.SetMaxOpenConns(maxConns)
	sqldb.SetMaxIdleConns(maxConns)
	sqldb.SetConnMaxLifetime(pgConnMaxLifetime)
	sqldb.SetConnMaxIdleTime(pgConnMaxIdleTime)

	if err := sqldb.PingContext(ctx); err != nil {
		_ = sqldb.Close()
		return nil, "", fmt.Errorf("db: connect to PostgreSQL %s: %s", where, scrubSecrets(err.Error(), u))
	}
	if err := ensureSchema(ctx, sqldb, schema); err != nil {
		_ = sqldb.Close()
		return nil, "", fmt.Errorf("db: PostgreSQL %s: %w", where, err)
	}
	return sqldb, where, nil
}

// scanTimesInUTC makes timestamptz values scan as time.UTC instead of
// time.Local, matching what SQLite returns.
func scanTimesInUTC(_ context.Context, conn *pgx.Conn) error {
	conn.TypeMap().RegisterType(&pgtype.Type{
		Name:  "timestamptz",
		OID:   pgtype.TimestamptzOID,
		Codec: &pgtype.TimestamptzCodec{ScanLocation: time.UTC},
	})
	return nil
}

// ensureSchema creates the schema unless it exists. The check comes first so
// a role without CREATE on the database can use a schema an operator made;
// the advisory lock serialises replicas, because concurrent CREATE SCHEMA IF
// NOT EXISTS can still fail with a unique violation.
func ensureSchema(ctx context.Context, sqldb *sql.DB, schema string) (err error) {
	tx, err := sqldb.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin schema transaction: %w", err)
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback()
		}
	}()
	if _, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock($1)`, advisoryKey("schema", schema)); err != nil {
		return fmt.Errorf("lock schema creation: %w", err)
	}
	var exists bool
	if err := tx.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)`, schema).Scan(&exists); err != nil {
		return fmt.Errorf("look up schema %q: %w", schema, err)
	}
	if !exists {
		if _, err := tx.ExecContext(ctx, "CREATE SCHEMA "+pgx.Identifier{schema}.Sanitize()); err != nil {
			return fmt.Errorf("create schema %q: %w", schema, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit schema creation: %w", err)
	}
	return nil
}

// advisoryKey derives a PostgreSQL advisory lock key for one purpose and
// schema, so services sharing a database never wait on each other.
func advisoryKey(purpose, schema string) int64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte("gatehouse/db/" + purpose + "/" + schema))
	return int64(h.Sum64())
}

// isPgUniqueViolation reports a PostgreSQL unique_violation (SQLSTATE 23505).
func isPgUniqueViolation(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "23505"
}
