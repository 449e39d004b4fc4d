//go:build !unix

package db

import "os"

// tryLock does not lock where flock is missing: Gatehouse is deployed on
// Linux; elsewhere (development) one process per data directory is the
// operator's to keep.
func tryLock(*os.File) (bool, error) { return true, nil }
