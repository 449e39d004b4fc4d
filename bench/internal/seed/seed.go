// Package seed grows a running distributed deployment's PostgreSQL
// database to the size `make bench-scale` measures at: users, access
// tokens and refresh tokens cloned from template rows the deployment made
// itself through its public API.
//
// Rows are made inside PostgreSQL (INSERT … SELECT over generate_series),
// so none crosses the wire: this is faster than COPY from a client, and a
// clone keeps every column the services wrote (a schema change needs no
// change here). Each clone differs from its template only in the columns
// that must be unique or that tie it to others (ids, names, hashes,
// subjects), and in its expiry, which lies a day ahead so the pruner keeps
// the rows while the scenarios run.
package seed

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// Prefixes of the seeded rows' ids, so they are told from real ones.
const (
	UserPrefix    = "seed-u-"
	AccessPrefix  = "seed-a-"
	RefreshPrefix = "seed-r-"
)

// Batch is the number of rows one statement inserts (one transaction each:
// bounded WAL and memory per step, progress between them).
const Batch = 250_000

// Templates name the rows the clones are made from.
type Templates struct {
	UserID         string // a human user (directory.users)
	AccessTokenID  string // an opaque access token (tokens.access_tokens)
	RefreshTokenID string // a refresh token (tokens.refresh_tokens)
}

// Sizes are the numbers of rows to add.
type Sizes struct {
	Users, AccessTokens, RefreshTokens int
}

// Progress is told after every batch.
type Progress func(table string, done, total int, elapsed time.Duration)

// Seed adds s's rows, cloned from t, then refreshes the planner's
// statistics of every table it grew.
func Seed(ctx context.Context, conn *pgx.Conn, t Templates, s Sizes, progress Progress) error {
	users := max(s.Users, 1)
	subject := fmt.Sprintf("'%s' || (g.i %% %d + 1)", UserPrefix, users)
	if s.Users == 0 {
		subject = "t.subject"
	}
	steps := []struct {
		c clone
		n int
	}{
		{clone{schema: "directory", table: "users", key: "id", template: t.UserID, set: map[string]string{
			"id":             "'" + UserPrefix + "' || g.i",
			"user_name":      "t.user_name || '-seed-' || g.i",
			"user_name_norm": "t.user_name_norm || '-seed-' || g.i",
			"email":          "'seed-' || g.i || '@bench.invalid'",
			"client_id":      "NULL",
		}}, s.Users},
		// Each user's history too: the event store grows with its users.
		{clone{schema: "directory", table: "events", key: "aggregate_id", template: t.UserID, set: map[string]string{
			"aggregate_id": "'" + UserPrefix + "' || g.i",
			"payload":      "replace(t.payload, t.aggregate_id, '" + UserPrefix + "' || g.i)",
		}}, s.Users},
		{clone{schema: "tokens", table: "access_tokens", key: "id", template: t.AccessTokenID, set: map[string]string{
			"id":         "'" + AccessPrefix + "' || g.i",
			"token_hash": "sha256(('" + AccessPrefix + "' || g.i)::bytea)",
			"subject":    subject,
			"expires_at": "now() + interval '1 day'",
		}}, s.AccessTokens},
		{clone{schema: "tokens", table: "refresh_tokens", key: "id", template: t.RefreshTokenID, set: map[string]string{
			"id":         "'" + RefreshPrefix + "' || g.i",
			"token_hash": "sha256(('" + RefreshPrefix + "' || g.i)::bytea)",
			"family_id":  "'seed-f-' || g.i",
			// Each its own session, as in life: clones of one session id
			// would teach the planner that a session has millions of them.
			"session_id":        "'seed-s-' || g.i",
			"subject":           subject,
			"expires_at":        "now() + interval '1 day'",
			"family_expires_at": "now() + interval '1 day'",
			"used_at":           "NULL",
			"replaced_by":       "NULL",
			"revoked_at":        "NULL",
		}}, s.RefreshTokens},
	}
	for _, st := range steps {
		if st.n == 0 {
			continue
		}
		if st.c.template == "" {
			return fmt.Errorf("seed %s.%s: no template row", st.c.schema, st.c.table)
		}
		q, err := st.c.statement(ctx, conn)
		if err != nil {
			return err
		}
		start := time.Now()
		for lo := 1; lo <= st.n; lo += Batch {
			hi := min(lo+Batch-1, st.n)
			tag, err := conn.Exec(ctx, q, st.c.template, lo, hi)
			if err != nil {
				return fmt.Errorf("seed %s.%s rows %d-%d: %w", st.c.schema, st.c.table, lo, hi, err)
			}
			if tag.RowsAffected() == 0 {
				return fmt.Errorf("seed %s.%s: template %q not found", st.c.schema, st.c.table, st.c.template)
			}
			if progress != nil {
				progress(st.c.schema+"."+st.c.table, hi, st.n, time.Since(start))
			}
		}
		// VACUUM as well as ANALYZE: a table just filled by bulk inserts
		// is not a table in service. Autovacuum would otherwise start on
		// it during the measurement, and the first reads would set every
		// row's hint bits and write the pages again, all counted as
		// PostgreSQL's CPU per request.
		if _, err := conn.Exec(ctx, "VACUUM (ANALYZE) "+st.c.qualified()); err != nil {
			return fmt.Errorf("vacuum %s: %w", st.c.qualified(), err)
		}
	}
	return nil
}

// clone copies one template row (or, for events, every row of one key)
// with some columns replaced by expressions of t (the template) and g.i
// (the clone's number).
type clone struct {
	schema, table string
	key           string // the column that names the template
	template      string
	set           map[string]string
}

func (c clone) qualified() string { return pgx.Identifier{c.schema, c.table}.Sanitize() }

// statement is the INSERT … SELECT of rows $2..$3 of template $1. Columns
// PostgreSQL generates (identities, generated columns) are left to it.
func (c clone) statement(ctx context.Context, conn *pgx.Conn) (string, error) {
	rows, err := conn.Query(ctx, `SELECT column_name FROM information_schema.columns
		WHERE table_schema = $1 AND table_name = $2 AND is_identity = 'NO' AND is_generated = 'NEVER'
		ORDER BY ordinal_position`, c.schema, c.table)
	if err != nil {
		return "", fmt.Errorf("columns of %s: %w", c.qualified(), err)
	}
	cols, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return "", fmt.Errorf("columns of %s: %w", c.qualified(), err)
	}
	if len(cols) == 0 {
		return "", fmt.Errorf("table %s not found", c.qualified())
	}
	names, values := make([]string, len(cols)), make([]string, len(cols))
	used := 0
	for i, col := range cols {
		names[i] = pgx.Identifier{col}.Sanitize()
		values[i] = "t." + names[i]
		if e, ok := c.set[col]; ok {
			values[i] = e
			used++
		}
	}
	if used != len(c.set) {
		return "", fmt.Errorf("%s lacks a column the seed sets (has %s)", c.qualified(), strings.Join(cols, ", "))
	}
	return fmt.Sprintf(`INSERT INTO %s (%s) SELECT %s FROM %s t, generate_series($2::int, $3::int) AS g(i) WHERE t.%s = $1`,
		c.qualified(), strings.Join(names, ", "), strings.Join(values, ", "), c.qualified(), pgx.Identifier{c.key}.Sanitize()), nil
}
