package db

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/jmoiron/sqlx"
)

// Tx is a transaction handed to the function given to DB.InTx; it must not
// be used after that function returns.
type Tx struct {
	tx      *sqlx.Tx
	dialect Dialect
	stmts   *stmtCache
}

// InTx runs fn in a transaction: it commits when fn returns nil and rolls
// back when fn returns an error (which InTx returns unchanged), panics (the
// panic continues) or calls runtime.Goexit. Errors from begin and commit
// are wrapped.
func (d *DB) InTx(ctx context.Context, fn func(tx *Tx) error) error {
	stx, err := d.db.BeginTxx(ctx, nil)
	if err != nil {
		return fmt.Errorf("db: begin transaction: %w", err)
	}
	finished := false
	defer func() {
		// Reached without finishing only on panic or Goexit.
		if !finished {
			_ = stx.Rollback()
		}
	}()
	if err := fn(&Tx{tx: stx, dialect: d.dialect, stmts: d.stmts}); err != nil {
		finished = true
		if rbErr := stx.Rollback(); rbErr != nil && !errors.Is(rbErr, sql.ErrTxDone) {
			return errors.Join(err, fmt.Errorf("db: rollback: %w", rbErr))
		}
		return err
	}
	finished = true
	if err := stx.Commit(); err != nil {
		return fmt.Errorf("db: commit: %w", err)
	}
	return nil
}

// Dialect reports the backend.
func (t *Tx) Dialect() Dialect { return t.dialect }

// SQLX exposes the transaction for what this package does not wrap; queries
// sent through it are not rebound and their times not normalised.
func (t *Tx) SQLX() *sqlx.Tx { return t.tx }

// Get scans the single row query returns into dest; sql.ErrNoRows when there
// is none (see NotFound).
func (t *Tx) Get(ctx context.Context, dest any, query string, args ...any) error {
	q := rebind(t.dialect, query)
	if st := t.stmts.getInTx(q); st != nil {
		return t.tx.StmtxContext(ctx, st).GetContext(ctx, dest, normalizeArgs(args)...)
	}
	return t.tx.GetContext(ctx, dest, q, normalizeArgs(args)...)
}

// Select scans every row query returns into dest, a pointer to a slice.
func (t *Tx) Select(ctx context.Context, dest any, query string, args ...any) error {
	q := rebind(t.dialect, query)
	if st := t.stmts.getInTx(q); st != nil {
		return t.tx.StmtxContext(ctx, st).SelectContext(ctx, dest, normalizeArgs(args)...)
	}
	return t.tx.SelectContext(ctx, dest, q, normalizeArgs(args)...)
}

// Exec runs a statement that returns no rows.
func (t *Tx) Exec(ctx context.Context, query string, args ...any) (sql.Result, error) {
	q := rebind(t.dialect, query)
	if st := t.stmts.getInTx(q); st != nil {
		return t.tx.StmtxContext(ctx, st).ExecContext(ctx, normalizeArgs(args)...)
	}
	return t.tx.ExecContext(ctx, q, normalizeArgs(args)...)
}
