package db

import (
	"database/sql"
	"errors"
	"fmt"
)

// Storage sentinels, checked with errors.Is. Stores return them wrapped.
var (
	// ErrNotFound: the row asked for does not exist.
	ErrNotFound = errors.New("not found")
	// ErrConflict: the write collides with existing data (a unique key, or
	// a lost optimistic-concurrency race).
	ErrConflict = errors.New("conflict")
)

// IsUniqueViolation reports whether err is a UNIQUE or PRIMARY KEY
// constraint failure from PostgreSQL (SQLSTATE 23505) or SQLite
// (SQLITE_CONSTRAINT_UNIQUE, SQLITE_CONSTRAINT_PRIMARYKEY).
func IsUniqueViolation(err error) bool {
	return err != nil && (isPgUniqueViolation(err) || isSQLiteUniqueViolation(err))
}

// NotFound maps sql.ErrNoRows to ErrNotFound, keeping the cause in the
// chain; any other error, and nil, is returned unchanged.
func NotFound(err error) error {
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("%w: %w", ErrNotFound, err)
	}
	return err
}

// Conflict maps a unique violation to ErrConflict, keeping the cause in the
// chain; any other error, and nil, is returned unchanged.
func Conflict(err error) error {
	if IsUniqueViolation(err) {
		return fmt.Errorf("%w: %w", ErrConflict, err)
	}
	return err
}
