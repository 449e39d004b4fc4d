package db

// CachedStatements is how many prepared statements d keeps.
func CachedStatements(d *DB) int {
	if d.stmts == nil {
		return 0
	}
	d.stmts.mu.RLock()
	defer d.stmts.mu.RUnlock()
	return len(d.stmts.m)
}
