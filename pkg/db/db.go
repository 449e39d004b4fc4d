package db

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"sync/atomic"
	"time"

	"github.com/jmoiron/sqlx"
)

// Querier runs rebound queries; *DB and *Tx implement it, so store helpers
// work inside and outside a transaction.
type Querier interface {
	Dialect() Dialect
	Get(ctx context.Context, dest any, query string, args ...any) error
	Select(ctx context.Context, dest any, query string, args ...any) error
	Exec(ctx context.Context, query string, args ...any) (sql.Result, error)
}

var (
	_ Querier = (*DB)(nil)
	_ Querier = (*Tx)(nil)
)

// DB is one service's migrated database. It is safe for concurrent use.
type DB struct {
	db      *sqlx.DB
	dialect Dialect
	service string
	stmts   *stmtCache // nil on PostgreSQL: pgx caches prepared statements itself
	relaxed *DB        // see Relaxed; nil when it is this DB
	lock    *os.File   // the SQLite data's lock (lockSQLite), released by Close
	path    string     // the SQLite file (with lock: Close leaves its clean marker)
	unclean bool       // see CleanStart
	// dirty: Close leaves no clean marker (MarkUnclean).
	dirty atomic.Bool
}

// Open validates o, connects, pings, creates the service's schema or file
// and applies pending migrations. Its errors never contain the URL's
// password.
func Open(ctx context.Context, o Options) (*DB, error) {
	d, err := o.validate()
	if err != nil {
		return nil, err
	}
	logger := o.Logger
	if logger == nil {
		logger = slog.Default()
	}

	var (
		sqldb      *sql.DB
		where      string
		driverName string
		lock       *os.File
		clean      = true
	)
	switch d {
	case SQLite:
		sqldb, where, lock, clean, err = openSQLite(ctx, o.DataDir, o.Service, o.Unlocked)
		driverName = "sqlite"
	case Postgres:
		sqldb, where, err = openPostgres(ctx, o.URL, o.Service, o.MaxConns)
		driverName = "pgx"
	}
	if err != nil {
		return nil, err
	}
	release := func() {
		if lock != nil {
			_ = lock.Close()
		}
	}
	if err := migrate(ctx, sqldb, d, o.Service, o.Migrations, logger); err != nil {
		_ = sqldb.Close()
		release()
		return nil, fmt.Errorf("%w (service %s at %s)", err, o.Service, where)
	}
	logger.InfoContext(ctx, "db: opened",
		slog.String("service", o.Service),
		slog.String("dialect", string(d)),
		slog.String("location", where))
	// sqlx picks the bind type from the driver name, for callers of SQLX().
	x := sqlx.NewDb(sqldb, driverName)
	out := &DB{db: x, dialect: d, service: o.Service, lock: lock, unclean: !clean}
	if lock != nil {
		out.path = where
	}
	if d == SQLite {
		out.stmts = &stmtCache{db: x}
		lazy, err := openSQLitePool(ctx, where, "NORMAL", sqliteRelaxedMaxOpenConns)
		if err != nil {
			_ = sqldb.Close()
			release()
			return nil, err
		}
		rx := sqlx.NewDb(lazy, driverName)
		out.relaxed = &DB{db: rx, dialect: d, service: o.Service, stmts: &stmtCache{db: rx}}
	}
	return out, nil
}

// Relaxed is the database for writes whose loss in a power failure fails
// closed: pending login state (authorization requests, identity-provider
// flows, failed-password counts), sign-ins, authorization codes and
// opaque access tokens' records. On SQLite its commits do not wait for
// the disk (synchronous NORMAL on the same file: a crash of the process
// loses nothing; a crash of the machine may forget the last of them, and
// the next durable commit, or a checkpoint, makes them durable too). A
// lost write of this kind makes someone sign in again or try again; it
// never grants or keeps access. Writes that do (redeeming a code and the
// tokens it issues, refresh rotation, revocation, logout, every change of
// the directory) use the DB itself. One relaxed write fails open when
// lost, a spent TOTP code's step; its reader fails it closed at the next
// start instead, when CleanStart says the last process did not close the
// file. A fsync costs SQLite's commit most of its CPU on a virtual disk;
// PostgreSQL's commit costs little, so there Relaxed is the DB itself.
func (d *DB) Relaxed() *DB {
	if d.relaxed != nil {
		return d.relaxed
	}
	return d
}

// Dialect reports the backend.
func (d *DB) Dialect() Dialect { return d.dialect }

// Service is the name the database was opened for (its schema or file).
func (d *DB) Service() string { return d.service }

// SQLX exposes the pool for what this package does not wrap; queries sent
// through it are not rebound (see Rebind) and their times not normalised.
func (d *DB) SQLX() *sqlx.DB { return d.db }

// Rebind returns query with ? placeholders in the dialect's syntax.
func (d *DB) Rebind(query string) string { return rebind(d.dialect, query) }

// Get scans the single row query returns into dest (a struct or scalar);
// sql.ErrNoRows when there is none (see NotFound).
func (d *DB) Get(ctx context.Context, dest any, query string, args ...any) error {
	q := rebind(d.dialect, query)
	if st := d.stmts.get(ctx, q); st != nil {
		return st.GetContext(ctx, dest, normalizeArgs(args)...)
	}
	return d.db.GetContext(ctx, dest, q, normalizeArgs(args)...)
}

// Select scans every row query returns into dest, a pointer to a slice.
func (d *DB) Select(ctx context.Context, dest any, query string, args ...any) error {
	q := rebind(d.dialect, query)
	if st := d.stmts.get(ctx, q); st != nil {
		return st.SelectContext(ctx, dest, normalizeArgs(args)...)
	}
	return d.db.SelectContext(ctx, dest, q, normalizeArgs(args)...)
}

// Exec runs a statement that returns no rows.
func (d *DB) Exec(ctx context.Context, query string, args ...any) (sql.Result, error) {
	q := rebind(d.dialect, query)
	if st := d.stmts.get(ctx, q); st != nil {
		return st.ExecContext(ctx, normalizeArgs(args)...)
	}
	return d.db.ExecContext(ctx, q, normalizeArgs(args)...)
}

// Ping checks that the database answers, for readiness probes.
func (d *DB) Ping(ctx context.Context) error {
	if err := d.db.PingContext(ctx); err != nil {
		return fmt.Errorf("db: ping %s: %w", d.dialect, err)
	}
	return nil
}

// MarkUnclean makes Close leave no clean marker: what this process keeps
// beside its data could not be saved, so the next start must count as
// after a crash (CleanStart false).
func (d *DB) MarkUnclean() { d.dirty.Store(true) }

// Close closes the pool; in-flight queries finish first. The SQLite lock
// is released last, once nothing of this DB can write any more.
func (d *DB) Close() error {
	var rerr error
	if d.relaxed != nil {
		rerr = d.relaxed.Close()
	}
	d.stmts.close()
	err := d.db.Close()
	if err == nil && rerr == nil && d.path != "" && !d.dirty.Load() {
		rerr = leaveCleanMarker(d.path)
	}
	if d.lock != nil {
		_ = d.lock.Close()
	}
	if err != nil {
		return fmt.Errorf("db: close: %w", err)
	}
	return rerr
}

// normalizeArgs converts time arguments to UTC with microsecond precision
// (PostgreSQL's), so both dialects store and return the same instant in the
// same form. It copies args only when it changes one.
func normalizeArgs(args []any) []any {
	first := slices.IndexFunc(args, func(a any) bool {
		switch a.(type) {
		case time.Time, *time.Time:
			return true
		}
		return false
	})
	if first < 0 {
		return args
	}
	out := make([]any, len(args))
	copy(out, args)
	for i := first; i < len(out); i++ {
		switch v := out[i].(type) {
		case time.Time:
			out[i] = normalizeTime(v)
		case *time.Time:
			if v != nil {
				out[i] = normalizeTime(*v)
			}
		}
	}
	return out
}

func normalizeTime(t time.Time) time.Time {
	return t.UTC().Truncate(time.Microsecond)
}
