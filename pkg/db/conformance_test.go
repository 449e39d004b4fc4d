package db_test

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/fstest"
	"time"

	"github.com/gatehouse-id/gatehouse/pkg/db"
	"github.com/gatehouse-id/gatehouse/pkg/testutil"
)

// Test migrations: the same tables in each dialect's own types.
const (
	sqliteInit = `-- +goose Up
CREATE TABLE items (
	id         INTEGER PRIMARY KEY,
	name       TEXT NOT NULL UNIQUE,
	note       TEXT,
	data       BLOB,
	created_at DATETIME,
	flag       BOOLEAN NOT NULL DEFAULT FALSE
);
CREATE TABLE children (
	id      INTEGER PRIMARY KEY,
	item_id INTEGER NOT NULL REFERENCES items (id)
);
CREATE TABLE log (
	seq    INTEGER PRIMARY KEY AUTOINCREMENT,
	worker INTEGER NOT NULL,
	n      INTEGER NOT NULL
);
-- +goose Down
DROP TABLE log;
DROP TABLE children;
DROP TABLE items;
`
	postgresInit = `-- +goose Up
CREATE TABLE items (
	id         BIGINT PRIMARY KEY,
	name       TEXT NOT NULL UNIQUE,
	note       TEXT,
	data       BYTEA,
	created_at TIMESTAMPTZ,
	flag       BOOLEAN NOT NULL DEFAULT FALSE
);
CREATE TABLE children (
	id      BIGINT PRIMARY KEY,
	item_id BIGINT NOT NULL REFERENCES items (id)
);
CREATE TABLE log (
	seq    BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	worker INTEGER NOT NULL,
	n      INTEGER NOT NULL
);
-- +goose Down
DROP TABLE log;
DROP TABLE children;
DROP TABLE items;
`
	// Portable, so one file serves both dialects.
	extraMigration = `-- +goose Up
CREATE TABLE extra (k TEXT PRIMARY KEY);
INSERT INTO extra (k) VALUES ('seeded');
-- +goose Down
DROP TABLE extra;
`
)

func migrationsV1() fstest.MapFS {
	return fstest.MapFS{
		"sqlite/00001_init.sql":   {Data: []byte(sqliteInit)},
		"postgres/00001_init.sql": {Data: []byte(postgresInit)},
	}
}

func migrationsV2() fstest.MapFS {
	m := migrationsV1()
	m["sqlite/00002_extra.sql"] = &fstest.MapFile{Data: []byte(extraMigration)}
	m["postgres/00002_extra.sql"] = &fstest.MapFile{Data: []byte(extraMigration)}
	return m
}

type item struct {
	ID        int64          `db:"id"`
	Name      string         `db:"name"`
	Note      sql.NullString `db:"note"`
	Data      []byte         `db:"data"`
	CreatedAt *time.Time     `db:"created_at"`
	Flag      bool           `db:"flag"`
}

// env is one place to open services: a SQLite data directory, or a
// PostgreSQL database with a schema prefix that is dropped after the test.
type env struct {
	dialect db.Dialect
	url     string
	dataDir string
	prefix  string
}

func newEnv(t *testing.T, d db.Dialect) env {
	t.Helper()
	switch d {
	case db.SQLite:
		// A directory Open has to create.
		return env{dialect: d, dataDir: filepath.Join(t.TempDir(), "data", "nested")}
	case db.Postgres:
		url, prefix := testutil.PostgresSchemaPrefix(t)
		return env{dialect: d, url: url, prefix: prefix}
	}
	t.Fatalf("unknown dialect %q", d)
	return env{}
}

func (e env) service(name string) string { return e.prefix + name }

func (e env) options(name string, m fs.FS) db.Options {
	return db.Options{
		URL:        e.url,
		DataDir:    e.dataDir,
		Service:    e.service(name),
		Migrations: m,
		Logger:     slog.New(slog.DiscardHandler),
	}
}

func (e env) open(t *testing.T, name string, m fs.FS) *db.DB {
	t.Helper()
	d, err := db.Open(context.Background(), e.options(name, m))
	if err != nil {
		t.Fatalf("Open(%s, %s): %v", e.dialect, name, err)
	}
	t.Cleanup(func() { _ = d.Close() })
	if d.Dialect() != e.dialect {
		t.Fatalf("Dialect() = %q; want %q", d.Dialect(), e.dialect)
	}
	return d
}

// forEachDialect runs fn as parallel subtests, each with its own env.
func forEachDialect(t *testing.T, fn func(t *testing.T, e env)) {
	t.Helper()
	for _, d := range []db.Dialect{db.SQLite, db.Postgres} {
		t.Run(string(d), func(t *testing.T) {
			t.Parallel()
			fn(t, newEnv(t, d))
		})
	}
}

func count(t *testing.T, q db.Querier, query string, args ...any) int {
	t.Helper()
	var n int
	if err := q.Get(context.Background(), &n, query, args...); err != nil {
		t.Fatalf("count %q: %v", query, err)
	}
	return n
}

func insertItem(ctx context.Context, q db.Querier, id int64, name string) error {
	_, err := q.Exec(ctx, `INSERT INTO items (id, name) VALUES (?, ?)`, id, name)
	return err
}

func TestOpenCreatesTablesInServiceStore(t *testing.T) {
	forEachDialect(t, func(t *testing.T, e env) {
		ctx := context.Background()
		d := e.open(t, "svc", migrationsV1())
		var tables []string
		switch e.dialect {
		case db.SQLite:
			path := filepath.Join(e.dataDir, "svc.db")
			fi, err := os.Stat(path)
			if err != nil {
				t.Fatalf("database file: %v", err)
			}
			if mode := fi.Mode().Perm(); mode != 0o600 {
				t.Errorf("file mode = %o; want 600", mode)
			}
			di, err := os.Stat(e.dataDir)
			if err != nil {
				t.Fatalf("data directory: %v", err)
			}
			if mode := di.Mode().Perm(); mode != 0o700 {
				t.Errorf("directory mode = %o; want 700", mode)
			}
			if err := d.Select(ctx, &tables, `SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name`); err != nil {
				t.Fatal(err)
			}
			var journal string
			var foreignKeys, busy int
			if err := d.Get(ctx, &journal, `PRAGMA journal_mode`); err != nil || journal != "wal" {
				t.Errorf("journal_mode = %q, %v; want wal", journal, err)
			}
			if err := d.Get(ctx, &foreignKeys, `PRAGMA foreign_keys`); err != nil || foreignKeys != 1 {
				t.Errorf("foreign_keys = %d, %v; want 1", foreignKeys, err)
			}
			if err := d.Get(ctx, &busy, `PRAGMA busy_timeout`); err != nil || busy != 5000 {
				t.Errorf("busy_timeout = %d, %v; want 5000", busy, err)
			}
		case db.Postgres:
			var current string
			if err := d.Get(ctx, &current, `SELECT current_schema()`); err != nil || current != e.service("svc") {
				t.Errorf("current_schema() = %q, %v; want %q", current, err, e.service("svc"))
			}
			if err := d.Select(ctx, &tables, `SELECT table_name FROM information_schema.tables WHERE table_schema = ? ORDER BY table_name`, e.service("svc")); err != nil {
				t.Fatal(err)
			}
		}
		want := []string{"children", "goose_db_version", "items", "log"}
		if !slices.Equal(tables, want) {
			t.Errorf("tables = %v; want %v", tables, want)
		}
		if err := d.Ping(ctx); err != nil {
			t.Errorf("Ping: %v", err)
		}
	})
}

func TestReopenIsIdempotent(t *testing.T) {
	forEachDialect(t, func(t *testing.T, e env) {
		ctx := context.Background()
		d1, err := db.Open(ctx, e.options("svc", migrationsV1()))
		if err != nil {
			t.Fatal(err)
		}
		if err := insertItem(ctx, d1, 1, "kept"); err != nil {
			t.Fatal(err)
		}
		versions := count(t, d1, `SELECT count(*) FROM goose_db_version`)
		if err := d1.Close(); err != nil {
			t.Fatal(err)
		}

		d2 := e.open(t, "svc", migrationsV1())
		var name string
		if err := d2.Get(ctx, &name, `SELECT name FROM items WHERE id = ?`, 1); err != nil || name != "kept" {
			t.Errorf("after reopen: name = %q, %v; want kept", name, err)
		}
		if got := count(t, d2, `SELECT count(*) FROM goose_db_version`); got != versions {
			t.Errorf("version rows after reopen = %d; want %d (nothing re-applied)", got, versions)
		}
	})
}

func TestNewMigrationAppliedOnReopen(t *testing.T) {
	forEachDialect(t, func(t *testing.T, e env) {
		ctx := context.Background()
		d1, err := db.Open(ctx, e.options("svc", migrationsV1()))
		if err != nil {
			t.Fatal(err)
		}
		if err := insertItem(ctx, d1, 7, "before"); err != nil {
			t.Fatal(err)
		}
		_ = d1.Close()

		var logs bytes.Buffer
		o := e.options("svc", migrationsV2())
		o.Logger = slog.New(slog.NewTextHandler(&logs, nil))
		d2, err := db.Open(ctx, o)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = d2.Close() })
		var k string
		if err := d2.Get(ctx, &k, `SELECT k FROM extra`); err != nil || k != "seeded" {
			t.Errorf("extra.k = %q, %v; want seeded", k, err)
		}
		var max int64
		if err := d2.Get(ctx, &max, `SELECT max(version_id) FROM goose_db_version`); err != nil || max != 2 {
			t.Errorf("max version = %d, %v; want 2", max, err)
		}
		if got := count(t, d2, `SELECT count(*) FROM items WHERE name = ?`, "before"); got != 1 {
			t.Errorf("rows from before the migration = %d; want 1", got)
		}
		if n := strings.Count(logs.String(), "db: migration applied"); n != 1 || !strings.Contains(logs.String(), "version=2") {
			t.Errorf("log = %q; want exactly one applied migration, version 2", logs.String())
		}
	})
}

func TestMigrationsAtRoot(t *testing.T) {
	root := fstest.MapFS{"00001_kv.sql": {Data: []byte(`-- +goose Up
CREATE TABLE kv (k TEXT PRIMARY KEY, v TEXT NOT NULL);
-- +goose Down
DROP TABLE kv;
`)}}
	forEachDialect(t, func(t *testing.T, e env) {
		ctx := context.Background()
		d := e.open(t, "svc", root)
		if _, err := d.Exec(ctx, `INSERT INTO kv (k, v) VALUES (?, ?)`, "a", "b"); err != nil {
			t.Fatal(err)
		}
		var v string
		if err := d.Get(ctx, &v, `SELECT v FROM kv WHERE k = ?`, "a"); err != nil || v != "b" {
			t.Errorf("v = %q, %v; want b", v, err)
		}
	})
}

func TestFailedMigrationIsReported(t *testing.T) {
	forEachDialect(t, func(t *testing.T, e env) {
		ctx := context.Background()
		m := migrationsV1()
		bad := []byte("-- +goose Up\nCREATE TABLE broken (;\n-- +goose Down\nSELECT 1;\n")
		m["sqlite/00002_broken.sql"] = &fstest.MapFile{Data: bad}
		m["postgres/00002_broken.sql"] = &fstest.MapFile{Data: bad}
		_, err := db.Open(ctx, e.options("svc", m))
		if err == nil || !strings.Contains(err.Error(), "00002_broken.sql") {
			t.Fatalf("Open with a broken migration: %v; want an error naming 00002_broken.sql", err)
		}
		// The good migration stays applied; the broken one left nothing.
		d := e.open(t, "svc", migrationsV1())
		var max int64
		if err := d.Get(ctx, &max, `SELECT max(version_id) FROM goose_db_version`); err != nil || max != 1 {
			t.Errorf("max version = %d, %v; want 1", max, err)
		}
	})
}

func TestRebindWithSeveralArgs(t *testing.T) {
	forEachDialect(t, func(t *testing.T, e env) {
		ctx := context.Background()
		d := e.open(t, "svc", migrationsV1())
		for i, name := range []string{"a", "b", "c", "d"} {
			if _, err := d.Exec(ctx, `INSERT INTO items (id, name, note, flag) VALUES (?, ?, ?, ?)`,
				i+1, name, "what?", i%2 == 0); err != nil {
				t.Fatalf("insert %s: %v", name, err)
			}
		}
		var names []string
		err := d.Select(ctx, &names, `
			SELECT name FROM items -- which ones?
			WHERE note = 'what?' /* literal ? stays */ AND id >= ? AND id <= ? AND flag = ? AND name <> ?
			ORDER BY id`, 1, 4, true, "c")
		if err != nil {
			t.Fatal(err)
		}
		if want := []string{"a"}; !slices.Equal(names, want) {
			t.Errorf("names = %v; want %v", names, want)
		}
		if got := d.Rebind(`SELECT ? , ?`); e.dialect == db.Postgres && got != `SELECT $1 , $2` || e.dialect == db.SQLite && got != `SELECT ? , ?` {
			t.Errorf("Rebind = %q; want the dialect's placeholders", got)
		}
	})
}

func TestTimeAndBytesRoundTrip(t *testing.T) {
	forEachDialect(t, func(t *testing.T, e env) {
		ctx := context.Background()
		d := e.open(t, "svc", migrationsV1())
		cet := time.FixedZone("CET", 3600)
		base := time.Date(2026, 11, 22, 13, 14, 15, 0, cet)
		data := []byte{0x00, 0xff, 0x10, 0x00, 'a', 0x80}
		stamps := []time.Time{
			base.Add(time.Second),
			base.Add(123456789 * time.Nanosecond), // sub-microsecond part is dropped
			base,
			base.Add(time.Microsecond),
		}
		for i, ts := range stamps {
			if _, err := d.Exec(ctx, `INSERT INTO items (id, name, data, created_at) VALUES (?, ?, ?, ?)`,
				i+1, fmt.Sprint("t", i), data, ts); err != nil {
				t.Fatal(err)
			}
		}
		ptr := base.Add(time.Hour)
		if _, err := d.Exec(ctx, `INSERT INTO items (id, name, created_at) VALUES (?, ?, ?)`, 10, "ptr", &ptr); err != nil {
			t.Fatal(err)
		}
		var nilTime *time.Time
		if _, err := d.Exec(ctx, `INSERT INTO items (id, name, created_at) VALUES (?, ?, ?)`, 11, "null", nilTime); err != nil {
			t.Fatal(err)
		}

		var got item
		if err := d.Get(ctx, &got, `SELECT * FROM items WHERE id = ?`, 2); err != nil {
			t.Fatal(err)
		}
		want := time.Date(2026, 11, 22, 12, 14, 15, 123456000, time.UTC)
		if got.CreatedAt == nil || !got.CreatedAt.Equal(want) || got.CreatedAt.Location() != time.UTC {
			t.Errorf("created_at = %v (location is time.UTC: %t); want %v in time.UTC",
				got.CreatedAt, got.CreatedAt != nil && got.CreatedAt.Location() == time.UTC, want)
		}
		if !bytes.Equal(got.Data, data) {
			t.Errorf("data = %x; want %x", got.Data, data)
		}
		if err := d.Get(ctx, &got, `SELECT * FROM items WHERE id = ?`, 10); err != nil {
			t.Fatal(err)
		}
		if got.CreatedAt == nil || !got.CreatedAt.Equal(ptr) {
			t.Errorf("created_at from *time.Time = %v; want %v", got.CreatedAt, ptr)
		}
		if err := d.Get(ctx, &got, `SELECT * FROM items WHERE id = ?`, 11); err != nil || got.CreatedAt != nil {
			t.Errorf("created_at from nil *time.Time = %v, %v; want NULL", got.CreatedAt, err)
		}

		// Stored times order and compare chronologically.
		var ids []int64
		if err := d.Select(ctx, &ids, `SELECT id FROM items WHERE created_at > ? AND created_at < ? ORDER BY created_at`,
			base, base.Add(time.Minute)); err != nil {
			t.Fatal(err)
		}
		if want := []int64{4, 2, 1}; !slices.Equal(ids, want) {
			t.Errorf("ids after base by time = %v; want %v", ids, want)
		}
	})
}

func TestInTx(t *testing.T) {
	forEachDialect(t, func(t *testing.T, e env) {
		ctx := context.Background()
		d := e.open(t, "svc", migrationsV1())

		errBoom := errors.New("boom")
		err := d.InTx(ctx, func(tx *db.Tx) error {
			if tx.Dialect() != e.dialect {
				t.Errorf("tx.Dialect() = %q; want %q", tx.Dialect(), e.dialect)
			}
			if err := insertItem(ctx, tx, 1, "one"); err != nil {
				return err
			}
			if err := insertItem(ctx, tx, 2, "two"); err != nil {
				return err
			}
			if n := count(t, tx, `SELECT count(*) FROM items`); n != 2 {
				t.Errorf("inside tx: %d rows; want 2", n)
			}
			return errBoom
		})
		if !errors.Is(err, errBoom) {
			t.Errorf("InTx = %v; want the function's error", err)
		}
		if n := count(t, d, `SELECT count(*) FROM items`); n != 0 {
			t.Errorf("after rollback on error: %d rows; want 0", n)
		}

		func() {
			defer func() {
				if p := recover(); p != "panic in tx" {
					t.Errorf("recovered %v; want the panic to propagate", p)
				}
			}()
			_ = d.InTx(ctx, func(tx *db.Tx) error {
				if err := insertItem(ctx, tx, 3, "three"); err != nil {
					t.Errorf("insert: %v", err)
				}
				panic("panic in tx")
			})
		}()
		if n := count(t, d, `SELECT count(*) FROM items`); n != 0 {
			t.Errorf("after rollback on panic: %d rows; want 0", n)
		}

		if err := d.InTx(ctx, func(tx *db.Tx) error { return insertItem(ctx, tx, 4, "four") }); err != nil {
			t.Fatalf("InTx commit: %v", err)
		}
		var name string
		if err := d.Get(ctx, &name, `SELECT name FROM items WHERE id = ?`, 4); err != nil || name != "four" {
			t.Errorf("after commit: %q, %v; want four", name, err)
		}
	})
}

func TestConstraintErrors(t *testing.T) {
	forEachDialect(t, func(t *testing.T, e env) {
		ctx := context.Background()
		d := e.open(t, "svc", migrationsV1())
		if err := insertItem(ctx, d, 1, "taken"); err != nil {
			t.Fatal(err)
		}

		dupName := insertItem(ctx, d, 2, "taken")
		dupKey := insertItem(ctx, d, 1, "other")
		for what, err := range map[string]error{"duplicate unique column": dupName, "duplicate primary key": dupKey} {
			if !db.IsUniqueViolation(err) {
				t.Errorf("%s: IsUniqueViolation(%v) = false; want true", what, err)
			}
			if c := db.Conflict(err); !errors.Is(c, db.ErrConflict) || !db.IsUniqueViolation(c) {
				t.Errorf("%s: Conflict(err) = %v; want ErrConflict keeping the cause", what, c)
			}
		}

		// A foreign key failure is an error (foreign keys are enforced on
		// SQLite too) but not a unique violation.
		_, fkErr := d.Exec(ctx, `INSERT INTO children (id, item_id) VALUES (?, ?)`, 1, 999)
		_, nullErr := d.Exec(ctx, `INSERT INTO items (id, name) VALUES (?, ?)`, 5, nil)
		for what, err := range map[string]error{"foreign key": fkErr, "not null": nullErr} {
			if err == nil {
				t.Errorf("%s violation: no error; want one", what)
				continue
			}
			if db.IsUniqueViolation(err) {
				t.Errorf("%s: IsUniqueViolation(%v) = true; want false", what, err)
			}
			if c := db.Conflict(err); c != err {
				t.Errorf("%s: Conflict changed a non-unique error to %v", what, c)
			}
		}
		if db.IsUniqueViolation(nil) || db.IsUniqueViolation(errors.New("UNIQUE constraint failed")) {
			t.Errorf("IsUniqueViolation matched nil or a plain error")
		}
		if db.Conflict(nil) != nil {
			t.Errorf("Conflict(nil) != nil")
		}
	})
}

func TestNotFound(t *testing.T) {
	forEachDialect(t, func(t *testing.T, e env) {
		ctx := context.Background()
		d := e.open(t, "svc", migrationsV1())
		var it item
		err := db.NotFound(d.Get(ctx, &it, `SELECT * FROM items WHERE id = ?`, 42))
		if !errors.Is(err, db.ErrNotFound) || !errors.Is(err, sql.ErrNoRows) {
			t.Errorf("NotFound(missing row) = %v; want ErrNotFound wrapping sql.ErrNoRows", err)
		}
		if err := insertItem(ctx, d, 42, "present"); err != nil {
			t.Fatal(err)
		}
		if err := db.NotFound(d.Get(ctx, &it, `SELECT * FROM items WHERE id = ?`, 42)); err != nil || it.Name != "present" {
			t.Errorf("NotFound(found row) = %v, name %q; want nil, present", err, it.Name)
		}
		other := db.NotFound(d.Get(ctx, &it, `SELECT * FROM no_such_table`))
		if other == nil || errors.Is(other, db.ErrNotFound) {
			t.Errorf("NotFound(other error) = %v; want the error unchanged", other)
		}
	})
}

func TestConcurrentWriters(t *testing.T) {
	const workers, perWorker = 8, 50
	forEachDialect(t, func(t *testing.T, e env) {
		ctx := context.Background()
		d := e.open(t, "svc", migrationsV1())
		var (
			wg   sync.WaitGroup
			mu   sync.Mutex
			seqs = map[int64]bool{}
			errs []error
		)
		for w := range workers {
			wg.Go(func() {
				for n := range perWorker {
					// Read then write in one transaction: the pattern that
					// fails with SQLITE_BUSY when transactions begin deferred.
					err := d.InTx(ctx, func(tx *db.Tx) error {
						var done int
						if err := tx.Get(ctx, &done, `SELECT count(*) FROM log WHERE worker = ?`, w); err != nil {
							return err
						}
						if done != n {
							return fmt.Errorf("worker %d sees %d rows; want %d", w, done, n)
						}
						var seq int64
						if err := tx.Get(ctx, &seq, `INSERT INTO log (worker, n) VALUES (?, ?) RETURNING seq`, w, n); err != nil {
							return err
						}
						mu.Lock()
						seqs[seq] = true
						mu.Unlock()
						return nil
					})
					if err != nil {
						mu.Lock()
						errs = append(errs, err)
						mu.Unlock()
						return
					}
				}
			})
		}
		wg.Wait()
		if len(errs) > 0 {
			t.Fatalf("%d writers failed, first: %v", len(errs), errs[0])
		}
		if n := count(t, d, `SELECT count(*) FROM log`); n != workers*perWorker {
			t.Errorf("rows = %d; want %d", n, workers*perWorker)
		}
		if len(seqs) != workers*perWorker {
			t.Errorf("distinct generated ids = %d; want %d", len(seqs), workers*perWorker)
		}
	})
}

func TestPostgresServicesAreIsolated(t *testing.T) {
	e := newEnv(t, db.Postgres)
	ctx := context.Background()
	a := e.open(t, "a", migrationsV1())
	b := e.open(t, "b", migrationsV1())
	if err := insertItem(ctx, a, 1, "same"); err != nil {
		t.Fatal(err)
	}
	if n := count(t, b, `SELECT count(*) FROM items`); n != 0 {
		t.Errorf("service b sees %d of a's rows; want 0", n)
	}
	if err := insertItem(ctx, b, 1, "same"); err != nil {
		t.Errorf("same key in service b: %v; want no conflict with a", err)
	}
	var schemas []string
	if err := a.Select(ctx, &schemas, `SELECT table_schema FROM information_schema.tables WHERE table_name = 'items' AND table_schema LIKE ? ORDER BY 1`, e.prefix+"%"); err != nil {
		t.Fatal(err)
	}
	if want := []string{e.service("a"), e.service("b")}; !slices.Equal(schemas, want) {
		t.Errorf("items tables in schemas %v; want %v", schemas, want)
	}
}

func TestPostgresConcurrentOpen(t *testing.T) {
	// Replicas starting together: the schema is created and each migration
	// applied exactly once.
	e := newEnv(t, db.Postgres)
	const replicas = 4
	dbs := make([]*db.DB, replicas)
	errs := make([]error, replicas)
	var wg sync.WaitGroup
	for i := range replicas {
		wg.Go(func() { dbs[i], errs[i] = db.Open(context.Background(), e.options("svc", migrationsV2())) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("replica %d: %v", i, err)
		}
		t.Cleanup(func() { _ = dbs[i].Close() })
	}
	if n := count(t, dbs[0], `SELECT count(*) FROM goose_db_version WHERE version_id > 0`); n != 2 {
		t.Errorf("applied versions = %d; want 2", n)
	}
	if n := count(t, dbs[0], `SELECT count(*) FROM extra`); n != 1 {
		t.Errorf("seeded rows = %d; want 1 (migration 2 applied once)", n)
	}
}

func TestSQLiteMaxLengthServiceName(t *testing.T) {
	e := newEnv(t, db.SQLite)
	name := "s" + strings.Repeat("x", 62)
	e.open(t, name, migrationsV1())
	if _, err := os.Stat(filepath.Join(e.dataDir, name+".db")); err != nil {
		t.Errorf("database file for a 63-character service: %v", err)
	}
}

// TestRelaxed: on SQLite, Relaxed writes the same file through connections
// whose commits do not sync (synchronous NORMAL = 1) while the DB's sync
// every commit (FULL = 2), and each sees the other's commits at once; on
// PostgreSQL it is the DB itself.
func TestRelaxed(t *testing.T) {
	forEachDialect(t, func(t *testing.T, e env) {
		ctx := context.Background()
		d := e.open(t, "svc", migrationsV1())
		r := d.Relaxed()
		if e.dialect == db.Postgres {
			if r != d {
				t.Fatal("Relaxed on PostgreSQL is another handle; want the DB itself")
			}
			return
		}
		if r == d {
			t.Fatal("Relaxed on SQLite is the DB itself; want the NORMAL pool")
		}
		if n := count(t, d, `PRAGMA synchronous`); n != 2 {
			t.Errorf("the DB's synchronous = %d; want FULL (2)", n)
		}
		if n := count(t, r, `PRAGMA synchronous`); n != 1 {
			t.Errorf("Relaxed's synchronous = %d; want NORMAL (1)", n)
		}
		if err := r.InTx(ctx, func(tx *db.Tx) error { return insertItem(ctx, tx, 1, "relaxed") }); err != nil {
			t.Fatal(err)
		}
		if n := count(t, d, `SELECT count(*) FROM items WHERE name = ?`, "relaxed"); n != 1 {
			t.Errorf("the DB sees %d rows of Relaxed's commit; want 1", n)
		}
		if err := insertItem(ctx, d, 2, "durable"); err != nil {
			t.Fatal(err)
		}
		if n := count(t, r, `SELECT count(*) FROM items`); n != 2 {
			t.Errorf("Relaxed sees %d rows; want both", n)
		}
		if err := d.Close(); err != nil {
			t.Fatal(err)
		}
		if err := r.Ping(ctx); err == nil {
			t.Error("Relaxed answers after the DB was closed; want it closed with it")
		}
	})
}
