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

// WithoutStatementCache makes d run every query unprepared (the plain arm
// of BenchmarkABStatementCache).
func WithoutStatementCache(d *DB) {
	d.stmts.close()
	d.stmts = nil
}

// WaitPrepared waits for the statements d is preparing in the background.
// No transaction may start one meanwhile.
func WaitPrepared(d *DB) {
	if d.stmts != nil {
		d.stmts.preparing.Wait()
	}
}
