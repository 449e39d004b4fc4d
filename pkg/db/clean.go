package db

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// A SQLite database's relaxed writes (see Relaxed) reach the disk at the
// next durable commit or checkpoint; a crash of the machine before then
// forgets them. Most of them fail closed when lost. For the few that fail
// open (a spent one-time code's record), the next start must know whether
// the previous process closed the database: Close leaves a marker beside
// the file once every write reached the disk, and Open takes it away, so
// a process that stops any other way (a crash of it or of the machine, a
// kill) leaves none.

// cleanMarker is the marker's path for the SQLite file at path.
func cleanMarker(path string) string { return path + ".clean" }

// takeCleanMarker reports whether the SQLite file at path was closed
// cleanly (or is new, created) and removes the marker, durably, so that
// this process must close cleanly too for the next start to say so.
func takeCleanMarker(path string, created bool) (bool, error) {
	marker := cleanMarker(path)
	err := os.Remove(marker)
	switch {
	case err == nil:
	case errors.Is(err, fs.ErrNotExist):
		return created, nil
	default:
		return false, fmt.Errorf("db: remove %s: %w", marker, err)
	}
	if err := syncDir(filepath.Dir(path)); err != nil {
		return false, err
	}
	return true, nil
}

// leaveCleanMarker records that the SQLite file at path was closed with
// every write on disk (closing the last connection checkpoints the WAL
// into the synced file).
func leaveCleanMarker(path string) error {
	marker := cleanMarker(path)
	f, err := os.OpenFile(marker, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("db: write %s: %w", marker, err)
	}
	if err := errors.Join(f.Sync(), f.Close()); err != nil {
		return fmt.Errorf("db: write %s: %w", marker, err)
	}
	return syncDir(filepath.Dir(path))
}

// syncDir makes a directory's entries (a file created or removed) durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("db: sync %s: %w", dir, err)
	}
	if err := errors.Join(d.Sync(), d.Close()); err != nil {
		return fmt.Errorf("db: sync %s: %w", dir, err)
	}
	return nil
}

// CleanStart reports whether every write of the process that used this
// database before reached the disk: on SQLite, that it closed the
// database (or that the file is new); always on PostgreSQL, whose relaxed
// writes are durable. A database opened unlocked (a second handle, in
// tests) reports true and leaves the marker to the lock's holder.
func (d *DB) CleanStart() bool { return !d.unclean }
