package db

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// sqliteParams configure every SQLite connection:
//   - busy_timeout first, so later pragmas and writers wait for a lock
//     instead of failing with SQLITE_BUSY;
//   - WAL lets readers run beside the one writer;
//   - synchronous FULL because no write is acknowledged before it is durable
//     (except through DB.Relaxed's pool, NORMAL);
//   - _txlock=immediate takes the write lock at BEGIN, so two transactions
//     that read then write cannot deadlock on lock upgrade (which SQLite
//     reports as SQLITE_BUSY at once, bypassing the busy timeout);
//   - times are written as "2006-01-02 15:04:05.999999999-07:00" in UTC and
//     read back in UTC.
func sqliteParams(synchronous string) string {
	return "_pragma=busy_timeout(5000)" +
		"&_pragma=journal_mode(WAL)" +
		"&_pragma=foreign_keys(1)" +
		"&_pragma=synchronous(" + synchronous + ")" +
		"&_txlock=immediate" +
		"&_time_format=sqlite" +
		"&_timezone=UTC"
}

// sqliteMaxOpenConns allows several WAL readers; writers queue on the lock.
// The relaxed pool (see DB.Relaxed) writes short login state only.
const (
	sqliteMaxOpenConns        = 8
	sqliteRelaxedMaxOpenConns = 4
)

// openSQLite opens <dataDir>/<service>.db, creating the directory (0700) and
// the file (0600) if needed, and pings it. Unless unlocked, it first takes
// the service's lock (lockSQLite), held until lock is closed, and the clean
// marker (takeCleanMarker). It returns the pool, the file's path, the lock
// (nil when unlocked) and whether the last process closed the file (true
// when unlocked).
func openSQLite(ctx context.Context, dataDir, service string, unlocked bool) (_ *sql.DB, _ string, lock *os.File, clean bool, err error) {
	dir, err := filepath.Abs(dataDir)
	if err != nil {
		return nil, "", nil, false, fmt.Errorf("db: resolve data directory: %w", err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, "", nil, false, fmt.Errorf("db: create data directory: %w", err)
	}
	if !unlocked {
		if lock, err = lockSQLite(dir, service); err != nil {
			return nil, "", nil, false, err
		}
		defer func() {
			if err != nil {
				_ = lock.Close()
			}
		}()
	}
	path := filepath.Join(dir, service+".db")
	_, statErr := os.Stat(path)
	created := errors.Is(statErr, fs.ErrNotExist)
	// Create the file ourselves: SQLite would use 0644, and its -wal and
	// -shm files copy the main file's mode.
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, "", nil, false, fmt.Errorf("db: create SQLite file: %w", err)
	}
	if err := f.Close(); err != nil {
		return nil, "", nil, false, fmt.Errorf("db: create SQLite file: %w", err)
	}
	clean = true
	if !unlocked {
		if clean, err = takeCleanMarker(path, created); err != nil {
			return nil, "", nil, false, err
		}
	}

	sqldb, err := openSQLitePool(ctx, path, "FULL", sqliteMaxOpenConns)
	if err != nil {
		return nil, "", nil, false, err
	}
	return sqldb, path, lock, clean, nil
}

// openSQLitePool opens a pool on the SQLite file at path whose commits
// sync as synchronous says (FULL or NORMAL), and pings it.
func openSQLitePool(ctx context.Context, path, synchronous string, conns int) (*sql.DB, error) {
	sqldb, err := sql.Open("sqlite", path+"?"+sqliteParams(synchronous))
	if err != nil {
		return nil, fmt.Errorf("db: open SQLite %s: %w", path, err)
	}
	sqldb.SetMaxOpenConns(conns)
	sqldb.SetMaxIdleConns(conns)
	// The first connection switches the file to WAL before others open.
	if err := sqldb.PingContext(ctx); err != nil {
		_ = sqldb.Close()
		return nil, fmt.Errorf("db: open SQLite %s: %w", path, err)
	}
	return sqldb, nil
}

// isSQLiteUniqueViolation reports a UNIQUE or PRIMARY KEY constraint failure
// (the driver enables extended result codes).
func isSQLiteUniqueViolation(err error) bool {
	var se *sqlite.Error
	if !errors.As(err, &se) {
		return false
	}
	switch se.Code() {
	case sqlite3.SQLITE_CONSTRAINT_UNIQUE, sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY:
		return true
	}
	return false
}
