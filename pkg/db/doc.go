// Package db owns Gatehouse's storage plumbing shared by every service:
// opening a database (SQLite in embedded mode, PostgreSQL when distributed),
// isolating each service's tables, applying its embedded migrations at start,
// and running queries and transactions with one query text for both dialects.
// It knows nothing about any service's tables; each service owns its
// migrations and its store packages, which take a [Querier].
//
// It depends on sqlx, modernc.org/sqlite (driver "sqlite", no cgo),
// pgx v5 through database/sql (stdlib), and goose v3 for migrations.
//
// # Isolation
//
// On PostgreSQL each service gets its own schema named after
// [Options.Service]; it is created if missing and set as search_path on every
// connection, so queries use unqualified table names. On SQLite each service
// gets its own file, <DataDir>/<Service>.db (the directory is created 0700,
// the file 0600; the WAL and shared-memory files inherit the file's mode),
// and one owner: the DB holds an flock on <DataDir>/<Service>.lock until it
// is closed, and another Open of the same data fails with [ErrLocked].
//
// # Migrations
//
// [Options.Migrations] holds goose SQL files (NNNNN_name.sql with
// "-- +goose Up" / "-- +goose Down" sections). If it has a directory named
// after the dialect ("sqlite" or "postgres") that directory is used,
// otherwise its root. With embed, pass fs.Sub(embedded, "migrations").
// Each migration runs in its own transaction (unless the file says
// "-- +goose NO TRANSACTION"); applied versions are recorded in
// goose_db_version inside the service's schema or file. On PostgreSQL a
// per-service advisory lock serialises replicas that start together.
// Go migrations registered globally with goose are ignored.
//
// # Query conventions
//
//   - Write placeholders as ?. On PostgreSQL they are rewritten to $1, $2, …
//     once per query text and cached; query texts should therefore be
//     constants (dynamic texts are rebound but the cache stops growing at a
//     fixed size). A ? inside a string literal, quoted identifier, comment
//     or dollar-quoted body is left alone. Do not mix ? with $n, and do not
//     use PostgreSQL's jsonb ?, ?| and ?& operators: use jsonb_exists,
//     jsonb_exists_any and jsonb_exists_all instead.
//   - Times: time.Time (and *time.Time) arguments are converted to UTC and
//     truncated to microseconds before they reach the driver, because that is
//     PostgreSQL's precision; both dialects therefore return exactly the value
//     that was written, in time.UTC. Declare time columns TIMESTAMPTZ on
//     PostgreSQL and DATETIME or TIMESTAMP (exactly these names) on SQLite,
//     where they are stored as text "2006-01-02 15:04:05.999999-07:00" in UTC,
//     which sorts chronologically. Pass times from Go rather than using SQL
//     now()/CURRENT_TIMESTAMP, whose types and precision differ per dialect.
//   - Bytes: []byte round-trips through BYTEA (PostgreSQL) and BLOB (SQLite).
//     A zero-length value reads back as nil on SQLite and as empty on
//     PostgreSQL; it is not NULL on either.
//   - Booleans: BOOLEAN on both (SQLite stores 0/1; scanning into bool works).
//   - Generated ids: use RETURNING with Get; sql.Result.LastInsertId is not
//     supported on PostgreSQL. Upserts: INSERT … ON CONFLICT (…) DO … works on
//     both.
//
// # Transactions
//
// [DB.InTx] commits when fn returns nil and rolls back when it returns an
// error, panics or exits the goroutine. On SQLite every transaction begins
// IMMEDIATE (it takes the write lock up front, waiting up to the 5 s busy
// timeout), so concurrent writers queue instead of failing with SQLITE_BUSY
// on lock upgrade; keep transactions short. Reads outside InTx run
// concurrently with a writer (WAL).
//
// # Errors
//
// Errors from Get, Select and Exec are the driver's, unwrapped; callers add
// context. [NotFound] maps sql.ErrNoRows to [ErrNotFound] and [Conflict] maps
// unique violations to [ErrConflict], both keeping the cause in the chain.
// Nothing in this package logs queries or their arguments.
package db
