package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gatehouse-id/gatehouse/bench/internal/launch"
	"github.com/gatehouse-id/gatehouse/bench/internal/report"
	"github.com/gatehouse-id/gatehouse/bench/internal/seed"
	"github.com/gatehouse-id/gatehouse/bench/internal/suite"
)

// scaleFactor is the most a scenario may cost at scale relative to the
// nearly empty database (issue 14: "each within 1.2 ×").
const scaleFactor = 1.2

// bigTables are the tables a scale run grows; a hot query that reads one
// of them whole does not keep its cost flat.
var bigTables = []string{"access_tokens", "refresh_tokens", "users", "events"}

// scaleMode is `make bench-scale`: one distributed deployment (signing
// RS256: token-es256 differs from token-rs256 only in the signature, not
// in what it reads) measured on its nearly empty database, then grown by
// seed to cfg's sizes and measured again. It returns both measurements and
// the plans of the hot queries on the grown database; problems name what
// broke the flat-cost rule.
func (b *bench) scaleMode(ctx context.Context, backends launch.Backends, log io.Writer) (modes []modeResult, plans []seed.Plan, problems []string, err error) {
	const alg = "RS256"
	kinds := b.selected(alg, plan[len(plan)-1].kinds) // the RS256 entry: every scenario but token-es256
	fmt.Fprintf(log, "gatehouse-bench: scale, %s: starting\n", alg)
	d, err := b.start(ctx, "distributed", alg, &backends)
	if err != nil {
		return nil, nil, nil, err
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		if serr := d.Stop(sctx); serr != nil {
			err = errors.Join(err, fmt.Errorf("stop: %w", serr))
		}
	}()
	conn, err := databaseConn(ctx, backends.PostgresURL, d.Database)
	if err != nil {
		return nil, nil, nil, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	library, version := signingLibrary(ctx, d)
	measure := func(title string) (modeResult, error) {
		m := modeResult{name: "distributed", nprocs: len(d.PIDs()), library: library, version: version}
		var err error
		m.rows, err = b.measure(ctx, d, alg, kinds)
		sortRows(m.rows)
		m.complete = err == nil
		if err != nil {
			return m, err
		}
		// Counted after the scenarios, which add their own rows.
		if m.users, m.tokens, err = tableSizes(ctx, conn); err != nil {
			return m, err
		}
		m.title = fmt.Sprintf("%s, %s: %d users, %d access and refresh tokens", m.name, title, m.users, m.tokens)
		return m, nil
	}

	empty, err := measure("empty")
	modes = append(modes, empty)
	if err != nil {
		return modes, nil, nil, err
	}
	tmpl, err := templates(ctx, conn)
	if err != nil {
		return modes, nil, nil, err
	}
	sizes := seed.Sizes{Users: b.cfg.scaleUsers, AccessTokens: b.cfg.scaleTokens / 2, RefreshTokens: b.cfg.scaleTokens - b.cfg.scaleTokens/2}
	start := time.Now()
	err = seed.Seed(ctx, conn, tmpl, sizes, func(table string, done, total int, elapsed time.Duration) {
		fmt.Fprintf(log, "gatehouse-bench: seed %s: %d of %d rows in %v\n", table, done, total, elapsed.Round(time.Second))
	})
	if err != nil {
		return modes, nil, nil, err
	}
	fmt.Fprintf(log, "gatehouse-bench: seeded %d users and %d tokens in %v\n", sizes.Users, sizes.AccessTokens+sizes.RefreshTokens, time.Since(start).Round(time.Second))
	b.seedTime = time.Since(start)

	grown, err := measure("seeded")
	modes = append(modes, grown)
	if err != nil {
		return modes, nil, nil, err
	}
	problems = append(problems, compare(empty, grown)...)
	var orgID string
	if err := conn.QueryRow(ctx, `SELECT org_id FROM directory.users WHERE id = $1`, tmpl.UserID).Scan(&orgID); err != nil {
		return modes, nil, problems, fmt.Errorf("template user's organization: %w", err)
	}
	if plans, err = seed.Explain(ctx, conn, seed.HotQueries(orgID)); err != nil {
		return modes, plans, problems, err
	}
	for _, p := range plans {
		for _, t := range p.SeqScans {
			if slices.Contains(bigTables, t) {
				problems = append(problems, fmt.Sprintf("%s reads %s whole (sequential scan)", p.Query.Name, t))
			}
		}
	}
	return modes, plans, problems, nil
}

// databaseConn connects to the deployment's database on the server of base.
func databaseConn(ctx context.Context, base, database string) (*pgx.Conn, error) {
	u, err := url.Parse(base)
	if err != nil {
		return nil, fmt.Errorf("PostgreSQL URL: %w", err)
	}
	u.Path = "/" + database
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(cctx, u.String())
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", database, err)
	}
	return conn, nil
}

// templates picks the rows to clone: the newest human user (the bench's
// own, not the bootstrap admin), the newest access token, and the newest
// unrevoked refresh token (the login scenario asks for offline_access).
func templates(ctx context.Context, conn *pgx.Conn) (seed.Templates, error) {
	var t seed.Templates
	for _, q := range []struct {
		what string
		sql  string
		dst  *string
	}{
		{"human user", `SELECT id FROM directory.users WHERE type = 1 ORDER BY creation_date DESC LIMIT 1`, &t.UserID},
		{"access token", `SELECT id FROM tokens.access_tokens ORDER BY created_at DESC LIMIT 1`, &t.AccessTokenID},
		{"refresh token", `SELECT id FROM tokens.refresh_tokens WHERE revoked_at IS NULL ORDER BY created_at DESC LIMIT 1`, &t.RefreshTokenID},
	} {
		if err := conn.QueryRow(ctx, q.sql).Scan(q.dst); err != nil {
			return t, fmt.Errorf("template %s: %w", q.what, err)
		}
	}
	return t, nil
}

// tableSizes counts users and stored tokens.
func tableSizes(ctx context.Context, conn *pgx.Conn) (users, tokens int64, err error) {
	err = conn.QueryRow(ctx, `SELECT (SELECT COUNT(*) FROM directory.users),
		(SELECT COUNT(*) FROM tokens.access_tokens) + (SELECT COUNT(*) FROM tokens.refresh_tokens)`).Scan(&users, &tokens)
	if err != nil {
		return 0, 0, fmt.Errorf("table sizes: %w", err)
	}
	return users, tokens, nil
}

// compare names each scenario whose CPU per request at scale exceeds
// scaleFactor × its cost on the empty database.
func compare(empty, grown modeResult) []string {
	var out []string
	for _, g := range grown.rows {
		i := slices.IndexFunc(empty.rows, func(e suite.Row) bool { return e.Scenario == g.Scenario })
		if i < 0 || !g.CPUKnown || !empty.rows[i].CPUKnown || empty.rows[i].CPUPerRequest() == 0 {
			continue
		}
		if r := ratio(empty.rows[i], g); r > scaleFactor {
			out = append(out, fmt.Sprintf("%s: %.2f × the empty database's CPU per request at scale (want ≤ %.1f)", g.Scenario, r, scaleFactor))
		}
	}
	return out
}

func ratio(empty, grown suite.Row) float64 {
	return float64(grown.CPUPerRequest()) / float64(empty.CPUPerRequest())
}

// scaleTable sets the two measurements side by side.
func scaleTable(empty, grown modeResult) report.Table {
	t := report.Table{
		Title:  fmt.Sprintf("scale: %d → %d users, %d → %d tokens", empty.users, grown.users, empty.tokens, grown.tokens),
		Header: []string{"scenario", "CPU/req empty", "CPU/req seeded", "ratio", "p99 empty", "p99 seeded", "within " + fmt.Sprint(scaleFactor) + "×"},
	}
	for _, g := range grown.rows {
		i := slices.IndexFunc(empty.rows, func(e suite.Row) bool { return e.Scenario == g.Scenario })
		if i < 0 || !g.Available || !empty.rows[i].Available {
			continue
		}
		e := empty.rows[i]
		r := ratio(e, g)
		ok := "yes"
		if r > scaleFactor {
			ok = "NO"
		}
		t.Rows = append(t.Rows, []string{g.Scenario, cpu(e), cpu(g), fmt.Sprintf("%.2f", r),
			ms(e.Result.Percentile(99)), ms(g.Result.Percentile(99)), ok})
	}
	return t
}

// writePlans writes the hot queries' plans as Markdown (for the bench
// README) next to the results file.
func writePlans(path string, plans []seed.Plan, grown modeResult) error {
	var b strings.Builder
	fmt.Fprintf(&b, "# Plans of the hot queries at %d users and %d tokens\n\nWritten by `make bench-scale` (EXPLAIN, COSTS OFF).\n\n", grown.users, grown.tokens)
	b.WriteString(seed.Markdown(plans))
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		return fmt.Errorf("write plans: %w", err)
	}
	return nil
}
