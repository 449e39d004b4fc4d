package seed

import (
	"context"
	"crypto/sha256"
	"fmt"
	"regexp"
	"strings"

	"github.com/jackc/pgx/v5"
)

// HotQuery is a query the services run per request (or per prune round),
// in PostgreSQL's form, with arguments that find seeded rows. The texts are
// the services' own (copied: they live in internal packages); a query that
// changes there should change here.
type HotQuery struct {
	Name   string
	Schema string
	SQL    string
	Args   []any
}

// HotQueries are the queries whose plans `make bench-scale` checks.
func HotQueries(orgID string) []HotQuery {
	accessHash := sha256.Sum256([]byte(AccessPrefix + "1"))
	refreshHash := sha256.Sum256([]byte(RefreshPrefix + "1"))
	const userCols = `u.id, u.org_id, u.user_name, u.state, u.email, u.email_verified, u.password_hash, o.name`
	return []HotQuery{
		{"introspection of an opaque token (tokens store.AccessByHash)", "tokens",
			`SELECT * FROM access_tokens WHERE token_hash = $1`, []any{accessHash[:]}},
		{"refresh (tokens store.RefreshByHash)", "tokens",
			`SELECT * FROM refresh_tokens WHERE token_hash = $1`, []any{refreshHash[:]}},
		{"revocation of a refresh family's access tokens", "tokens",
			`SELECT id, expires_at FROM access_tokens WHERE refresh_id IN (SELECT id FROM refresh_tokens WHERE family_id = $1) AND expires_at > now() ORDER BY id`,
			[]any{"seed-f-1"}},
		{"revocation of a session's tokens (logout)", "tokens",
			`SELECT id, expires_at FROM access_tokens WHERE session_id = $1 AND expires_at > now()
UNION
SELECT a.id, a.expires_at FROM access_tokens a JOIN refresh_tokens r ON r.id = a.refresh_id WHERE r.session_id = $1 AND a.expires_at > now()
ORDER BY id`,
			[]any{"no-such-session"}},
		{"prune of expired access tokens", "tokens",
			`SELECT id FROM access_tokens WHERE expires_at < now() LIMIT 1000`, nil},
		{"prune of expired refresh tokens", "tokens",
			`SELECT id FROM refresh_tokens WHERE expires_at < now() LIMIT 1000`, nil},
		{"prune of ended refresh families", "tokens",
			`SELECT id FROM refresh_tokens WHERE family_expires_at < now() LIMIT 1000`, nil},
		{"a user's claims (directory GetClaims, users.ByID)", "directory",
			`SELECT ` + userCols + ` FROM users u JOIN orgs o ON o.id = u.org_id WHERE u.id = $1`, []any{UserPrefix + "1"}},
		{"login by user name (directory LookupUser)", "directory",
			`SELECT ` + userCols + ` FROM users u JOIN orgs o ON o.id = u.org_id WHERE u.org_id = $1 AND u.user_name_norm = $2`,
			[]any{orgID, "nobody-seed-1"}},
		{"login by e-mail (directory LookupUser)", "directory",
			`SELECT ` + userCols + ` FROM users u JOIN orgs o ON o.id = u.org_id WHERE u.org_id = $1 AND u.type = $2 AND LOWER(u.email) = $3 AND u.email_verified = $4 LIMIT 2`,
			[]any{orgID, 1, "seed-1@bench.invalid", true}},
		{"a machine user's client (directory GetClient)", "directory",
			`SELECT ` + userCols + ` FROM users u JOIN orgs o ON o.id = u.org_id WHERE u.client_id = $1`, []any{"no-such-client"}},
		{"an aggregate's next version (directory event store Push)", "directory",
			`SELECT COALESCE(MAX(aggregate_version), 0) FROM events WHERE aggregate_id = $1`, []any{UserPrefix + "1"}},
		{"the change feed (directory ListChanges)", "directory",
			`SELECT sequence, aggregate_type, aggregate_id FROM events WHERE sequence > $1 ORDER BY sequence LIMIT 500`, []any{int64(1) << 40}},
		{"the list APIs' last event of a type", "directory",
			`SELECT sequence, created_at FROM events WHERE aggregate_type = $1 ORDER BY sequence DESC LIMIT 1`, []any{"project"}},
	}
}

// Plan is a hot query's plan on the seeded database.
type Plan struct {
	Query HotQuery
	Text  string
	// SeqScans names the tables the plan reads whole.
	SeqScans []string
}

var seqScan = regexp.MustCompile(`Seq Scan on (\w+)`)

// Explain plans every query (EXPLAIN with the planner's real statistics,
// without running it).
func Explain(ctx context.Context, conn *pgx.Conn, queries []HotQuery) ([]Plan, error) {
	var out []Plan
	for _, q := range queries {
		if _, err := conn.Exec(ctx, "SET search_path TO "+pgx.Identifier{q.Schema}.Sanitize()); err != nil {
			return out, fmt.Errorf("search_path %s: %w", q.Schema, err)
		}
		rows, err := conn.Query(ctx, "EXPLAIN (COSTS OFF) "+q.SQL, q.Args...)
		if err != nil {
			return out, fmt.Errorf("explain %s: %w", q.Name, err)
		}
		lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return out, fmt.Errorf("explain %s: %w", q.Name, err)
		}
		p := Plan{Query: q, Text: strings.Join(lines, "\n")}
		for _, m := range seqScan.FindAllStringSubmatch(p.Text, -1) {
			p.SeqScans = append(p.SeqScans, m[1])
		}
		out = append(out, p)
	}
	_, err := conn.Exec(ctx, "RESET search_path")
	return out, err
}

// Markdown renders plans for the bench README.
func Markdown(plans []Plan) string {
	var b strings.Builder
	for _, p := range plans {
		fmt.Fprintf(&b, "**%s**\n\n```sql\n%s\n```\n\n```\n%s\n```\n\n", p.Query.Name, p.Query.SQL, p.Text)
	}
	return b.String()
}
