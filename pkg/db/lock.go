package db

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// ErrLocked is returned (wrapped) by Open when another process, or another
// Open in this one, holds a service's SQLite data.
var ErrLocked = errors.New("db: SQLite data in use")

// lockSQLite takes the exclusive lock on <dir>/<service>.lock for as long
// as the returned file stays open. A service trusts what it keeps in memory
// beside its SQLite file (the revocation list, caches of its own rows), so
// a second process on the same file would serve from a state the first one
// changes under it; PostgreSQL deployments share through the database and
// Redis instead. The lock is an flock: the kernel drops it when the
// process dies, so a crash never leaves a stale lock behind, and it
// belongs to the open file, so two opens in one process conflict too.
func lockSQLite(dir, service string) (*os.File, error) {
	path := filepath.Join(dir, service+".lock")
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("db: open lock file: %w", err)
	}
	held, err := tryLock(f)
	if err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("db: lock %s: %w", path, err)
	}
	if !held {
		holder := ""
		if b, _ := os.ReadFile(path); len(b) > 0 {
			if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
				holder = fmt.Sprintf(", by pid %d", pid)
			}
		}
		_ = f.Close()
		return nil, fmt.Errorf("%w: another process holds the %s data in %s (%s is locked%s); stop it, or give this one another GATEHOUSE_DATA_DIR",
			ErrLocked, service, dir, path, holder)
	}
	// The holder's pid, for the message above (informative only: the lock
	// is the flock, not the file's content).
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return f, nil
}
