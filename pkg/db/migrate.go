package db

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"path"

	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"
)

// versionTable is goose's record of applied migrations, kept in the
// service's schema or file.
const versionTable = "goose_db_version"

// migrate applies every pending migration of the dialect's directory (or the
// FS root) and logs what it applied.
func migrate(ctx context.Context, sqldb *sql.DB, d Dialect, schema string, migrations fs.FS, logger *slog.Logger) error {
	fsys, err := dialectFS(migrations, d)
	if err != nil {
		return err
	}
	opts := []goose.ProviderOption{
		// Go migrations registered by any imported package would otherwise
		// run against every service's database.
		goose.WithDisableGlobalRegistry(true),
		goose.WithSlog(logger),
	}
	var gd goose.Dialect
	switch d {
	case Postgres:
		gd = goose.DialectPostgres
		locker, err := lock.NewPostgresSessionLocker(
			lock.WithLockID(advisoryKey("migrate", schema)),
			lock.WithLockTimeout(1, 300), // retry every second for up to 5 minutes
		)
		if err != nil {
			return fmt.Errorf("db: migration lock: %w", err)
		}
		// Unqualified: search_path is the service's schema alone, so the
		// table lands there, and goose never has to quote the schema name.
		opts = append(opts,
			goose.WithTableName(versionTable),
			goose.WithSessionLocker(locker),
		)
	case SQLite:
		gd = goose.DialectSQLite3
		opts = append(opts, goose.WithTableName(versionTable))
	default:
		return fmt.Errorf("db: no migrations for dialect %q", d)
	}
	p, err := goose.NewProvider(gd, sqldb, fsys, opts...)
	if errors.Is(err, goose.ErrNoMigrations) {
		return fmt.Errorf("db: %w for %s (want *.sql files in %s/ or at the root)", err, d, d)
	}
	if err != nil {
		return fmt.Errorf("db: load migrations: %w", err)
	}
	// Not p.Close: it would close sqldb.
	results, err := p.Up(ctx)
	var pe *goose.PartialError
	if errors.As(err, &pe) {
		results = pe.Applied
	}
	for _, r := range results {
		logger.InfoContext(ctx, "db: migration applied",
			slog.String("service", schema),
			slog.String("dialect", string(d)),
			slog.Int64("version", r.Source.Version),
			slog.String("source", path.Base(r.Source.Path)),
			slog.Duration("duration", r.Duration))
	}
	if err != nil {
		if pe != nil && pe.Failed != nil && pe.Failed.Source != nil {
			return fmt.Errorf("db: migration %s failed: %w", path.Base(pe.Failed.Source.Path), pe.Err)
		}
		return fmt.Errorf("db: migrate: %w", err)
	}
	return nil
}

// dialectFS returns the dialect's subdirectory of fsys if it has one, else
// fsys itself.
func dialectFS(fsys fs.FS, d Dialect) (fs.FS, error) {
	fi, err := fs.Stat(fsys, string(d))
	switch {
	case err == nil && fi.IsDir():
		sub, err := fs.Sub(fsys, string(d))
		if err != nil {
			return nil, fmt.Errorf("db: migrations directory %s: %w", d, err)
		}
		return sub, nil
	case err == nil, errors.Is(err, fs.ErrNotExist):
		return fsys, nil
	default:
		return nil, fmt.Errorf("db: migrations directory %s: %w", d, err)
	}
}
