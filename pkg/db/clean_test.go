package db_test

import (
	"context"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/gatehouse-id/gatehouse/pkg/db"
)

// crashDirEnv makes the test binary a process that opens the SQLite data
// in that directory, writes, and exits without closing it (a crash).
const crashDirEnv = "GATEHOUSE_TEST_DB_CRASH_DIR"

func TestMain(m *testing.M) {
	if dir := os.Getenv(crashDirEnv); dir != "" {
		ctx := context.Background()
		d, err := db.Open(ctx, db.Options{DataDir: dir, Service: "svc", Migrations: migrationsV1(), Logger: slog.New(slog.DiscardHandler)})
		if err == nil {
			err = insertItem(ctx, d.Relaxed(), 99, "crashed")
		}
		if err != nil {
			os.Exit(3)
		}
		os.Exit(0) // without Close
	}
	os.Exit(m.Run())
}

// CleanStart tells a start after a closed SQLite database (or a new one)
// from a start after a process that stopped without closing it, whose
// relaxed writes a crash of the machine may have lost. A second handle
// opened unlocked neither takes nor reads the owner's marker.
func TestCleanStart(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	opts := db.Options{DataDir: dir, Service: "svc", Migrations: migrationsV1(), Logger: slog.New(slog.DiscardHandler)}
	marker := filepath.Join(dir, "svc.db.clean")
	open := func() *db.DB {
		t.Helper()
		d, err := db.Open(ctx, opts)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	exists := func() bool {
		_, err := os.Stat(marker)
		return err == nil
	}

	d := open()
	if !d.CleanStart() {
		t.Fatal("a new database: CleanStart false; want true")
	}
	if err := insertItem(ctx, d.Relaxed(), 1, "relaxed"); err != nil {
		t.Fatal(err)
	}
	if exists() {
		t.Fatal("the clean marker exists while the database is open")
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if !exists() {
		t.Fatal("no clean marker after Close")
	}

	d = open()
	if !d.CleanStart() || exists() {
		t.Fatalf("after a Close: CleanStart %v, marker left %v; want true, taken", d.CleanStart(), exists())
	}
	unlocked := opts
	unlocked.Unlocked = true
	peek, err := db.Open(ctx, unlocked)
	if err != nil {
		t.Fatal(err)
	}
	if !peek.CleanStart() {
		t.Fatal("an unlocked handle: CleanStart false; want true")
	}
	if err := peek.Close(); err != nil {
		t.Fatal(err)
	}
	if exists() {
		t.Fatal("an unlocked handle's Close left the owner's marker")
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}

	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), crashDirEnv+"="+dir)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("crashing process: %v\n%s", err, out)
	}
	d = open()
	t.Cleanup(func() { _ = d.Close() })
	if d.CleanStart() {
		t.Fatal("after a process that exited without Close: CleanStart true; want false")
	}
	var n int
	if err := d.Get(ctx, &n, `SELECT COUNT(*) FROM items WHERE id = 99`); err != nil || n != 1 {
		t.Fatalf("the crashed process's write: %d, %v (a crash of the process loses none)", n, err)
	}
}

// TestMarkUnclean: a Close after MarkUnclean leaves no marker, so the
// next start counts as after a crash.
func TestMarkUnclean(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	opts := db.Options{DataDir: t.TempDir(), Service: "svc", Migrations: migrationsV1(), Logger: slog.New(slog.DiscardHandler)}
	d, err := db.Open(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	d.MarkUnclean()
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if d, err = db.Open(ctx, opts); err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if d.CleanStart() {
		t.Fatal("after a Close marked unclean: CleanStart true; want false")
	}
}
