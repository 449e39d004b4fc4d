package seed

import (
	"context"
	"crypto/sha256"
	"io/fs"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gatehouse-id/gatehouse/pkg/db"
	"github.com/gatehouse-id/gatehouse/pkg/logging"
	"github.com/gatehouse-id/gatehouse/pkg/testutil"
	directorymigrations "github.com/gatehouse-id/gatehouse/services/directory/migrations"
	tokensmigrations "github.com/gatehouse-id/gatehouse/services/tokens/migrations"
)

// migrated opens a fresh database with the directory's and tokens' real
// schemas, as a deployment has them, holding one template of each row.
func migrated(t *testing.T) (*pgx.Conn, Templates) {
	t.Helper()
	ctx := context.Background()
	url := testutil.PostgresDatabase(t)
	for service, m := range map[string]fs.FS{"directory": directorymigrations.FS, "tokens": tokensmigrations.FS} {
		d, err := db.Open(ctx, db.Options{URL: url, Service: service, Migrations: m, Logger: logging.Discard()})
		if err != nil {
			t.Fatal(err)
		}
		if err := d.Close(); err != nil {
			t.Fatal(err)
		}
	}
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	now := time.Now()
	hash := sha256.Sum256([]byte("template"))
	for _, q := range []struct {
		sql  string
		args []any
	}{
		{`INSERT INTO directory.orgs (id, name, primary_domain, state, pw_min_length, pw_has_uppercase, pw_has_lowercase, pw_has_number,
			pw_has_symbol, pw_history, lockout_max_attempts, creation_date, change_date, sequence, version)
			VALUES ('org1', 'Org', 'org.example', 1, 8, false, false, false, false, 0, 0, $1, $1, 1, 1)`, []any{now}},
		{`INSERT INTO directory.users (id, org_id, type, user_name, user_name_norm, state, first_name, last_name, nick_name, display_name,
			preferred_language, gender, email, email_verified, phone, phone_verified, password_hash, password_change_required,
			machine_name, machine_description, access_token_type, creation_date, change_date, sequence, version)
			VALUES ('u1', 'org1', 1, 'Alice', 'alice', 1, 'A', 'L', '', 'A L', 'en', 0, 'alice@org.example', true, '', false,
			'$argon2id$x', false, '', '', 0, $1, $1, 2, 1)`, []any{now}},
		{`INSERT INTO directory.events (aggregate_type, aggregate_id, aggregate_version, event_type, payload, resource_owner, editor, created_at)
			VALUES ('user', 'u1', 1, 'user.human.added', '{"id":"u1","userName":"Alice"}', 'org1', 'admin', $1)`, []any{now}},
		{`INSERT INTO tokens.access_tokens (id, token_hash, client_id, subject, org_id, scopes, audience, amr, created_at, expires_at)
			VALUES ('a1', $1, 'c1', 'u1', 'org1', 'openid', 'c1', '[]', $2, $2)`, []any{hash[:], now}},
		{`INSERT INTO tokens.refresh_tokens (id, token_hash, family_id, client_id, subject, org_id, scopes, audience, auth_time, amr,
			created_at, expires_at, family_expires_at, used_at) VALUES ('r1', $1, 'f1', 'c1', 'u1', 'org1', 'openid', 'c1', $2, '[]', $2, $2, $2, $2)`,
			[]any{hash[:], now}},
	} {
		if _, err := conn.Exec(ctx, q.sql, q.args...); err != nil {
			t.Fatalf("template: %v\n%s", err, q.sql)
		}
	}
	return conn, Templates{UserID: "u1", AccessTokenID: "a1", RefreshTokenID: "r1"}
}

func count(t *testing.T, conn *pgx.Conn, q string, args ...any) int {
	t.Helper()
	var n int
	if err := conn.QueryRow(context.Background(), q, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return n
}

// TestSeedClonesOnTheRealSchema: every row is a distinct clone tied to a
// seeded user, live for a day, and the hot queries find them by index.
func TestSeedClonesOnTheRealSchema(t *testing.T) {
	conn, tmpl := migrated(t)
	ctx := context.Background()
	var batches int
	sizes := Sizes{Users: 300, AccessTokens: Batch + 10, RefreshTokens: 200}
	err := Seed(ctx, conn, tmpl, sizes, func(table string, done, total int, _ time.Duration) {
		if done > total {
			t.Errorf("%s: %d of %d", table, done, total)
		}
		batches++
	})
	if err != nil {
		t.Fatal(err)
	}
	if batches != 5 { // one per table, two for access tokens
		t.Errorf("%d progress reports; want 5", batches)
	}
	for q, want := range map[string]int{
		`SELECT COUNT(*) FROM directory.users WHERE id LIKE 'seed-u-%'`:                                                                                300,
		`SELECT COUNT(DISTINCT user_name_norm) FROM directory.users`:                                                                                   301,
		`SELECT COUNT(*) FROM directory.events WHERE aggregate_id LIKE 'seed-u-%' AND payload LIKE '%seed-u-%'`:                                        300,
		`SELECT COUNT(DISTINCT token_hash) FROM tokens.access_tokens`:                                                                                  Batch + 11,
		`SELECT COUNT(*) FROM tokens.access_tokens WHERE id LIKE 'seed-a-%' AND expires_at > now() + interval '23 hours'`:                              Batch + 10,
		`SELECT COUNT(*) FROM tokens.refresh_tokens WHERE id LIKE 'seed-r-%' AND used_at IS NULL`:                                                      200,
		`SELECT COUNT(DISTINCT subject) FROM tokens.access_tokens WHERE id LIKE 'seed-a-%'`:                                                            300,
		`SELECT COUNT(*) FROM tokens.access_tokens a WHERE id LIKE 'seed-a-%' AND NOT EXISTS (SELECT 1 FROM directory.users u WHERE u.id = a.subject)`: 0,
	} {
		if got := count(t, conn, q); got != want {
			t.Errorf("%s = %d; want %d", q, got, want)
		}
	}
	if err := Seed(ctx, conn, Templates{UserID: "nobody"}, Sizes{Users: 1}, nil); err == nil {
		t.Error("seeding from a missing template succeeded")
	}

	plans, err := Explain(ctx, conn, HotQueries("org1"))
	if err != nil {
		t.Fatal(err)
	}
	// Only access_tokens is big enough here for the planner to prefer an
	// index; make bench-scale checks every table at full size.
	for _, p := range plans {
		if slices.Contains(p.SeqScans, "access_tokens") {
			t.Errorf("%s reads access_tokens whole:\n%s", p.Query.Name, p.Text)
		}
	}
	if md := Markdown(plans); len(md) == 0 {
		t.Error("no plans rendered")
	}
}

// TestCloneNamesEveryColumnItSets: a seed that sets a column the table
// lacks (a schema change) fails before it inserts anything.
func TestCloneNamesEveryColumnItSets(t *testing.T) {
	conn, tmpl := migrated(t)
	c := clone{schema: "tokens", table: "access_tokens", key: "id", template: tmpl.AccessTokenID, set: map[string]string{"no_such_column": "1"}}
	if _, err := c.statement(context.Background(), conn); err == nil {
		t.Error("statement with an unknown column succeeded")
	}
	if _, err := (clone{schema: "tokens", table: "nope", key: "id"}).statement(context.Background(), conn); err == nil {
		t.Error("statement for a missing table succeeded")
	}
}
