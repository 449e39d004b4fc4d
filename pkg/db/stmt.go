package db

import (
	"context"
	"sync"
	"time"

	"github.com/jmoiron/sqlx"
)

// maxStmts bounds the statement cache; queries past it run unprepared.
// Gatehouse's queries are constants, so the bound is only a safeguard
// against a caller that builds query text from data.
const maxStmts = 512

// stmtCache keeps one prepared statement per query text. SQLite compiles a
// statement on every unprepared query, and compiling cost more than running
// the point lookups of the hot paths (a third of an introspection). A
// database/sql Stmt prepares itself on each pooled connection that runs it
// and is used inside transactions through Tx.Stmt, which reuses the
// connection's prepared form. PostgreSQL needs none of this: pgx caches
// prepared statements per connection itself.
type stmtCache struct {
	db      *sqlx.DB
	mu      sync.RWMutex
	m       map[string]*sqlx.Stmt
	pending map[string]bool // being prepared in the background
	closed  bool
	// preparing counts the background prepares: close waits for them, so
	// none holds a connection (SQLite: its files) once the pool is closed.
	preparing sync.WaitGroup
}

// get returns the prepared statement for query, or nil when c is nil, the
// cache is full or preparing failed (the caller then runs the query
// unprepared and reports its error).
func (c *stmtCache) get(ctx context.Context, query string) *sqlx.Stmt {
	if c == nil {
		return nil
	}
	if st, ok := c.lookup(query); ok {
		return st
	}
	st, err := c.db.PreparexContext(context.WithoutCancel(ctx), query)
	if err != nil {
		return nil
	}
	return c.store(query, st)
}

// getInTx is get for a query inside a transaction. Preparing on the pool
// needs a free connection, and waiting for one while this transaction holds
// SQLite's write lock could wait for transactions that wait for the lock:
// a statement not yet cached runs unprepared, and is prepared in the
// background for the next time.
func (c *stmtCache) getInTx(query string) *sqlx.Stmt {
	if c == nil {
		return nil
	}
	st, ok := c.lookup(query)
	if ok {
		return st
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed || c.pending[query] || len(c.m)+len(c.pending) >= maxStmts {
		return nil
	}
	if c.pending == nil {
		c.pending = make(map[string]bool)
	}
	c.pending[query] = true
	c.preparing.Add(1)
	go func() {
		defer c.preparing.Done()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		st, err := c.db.PreparexContext(ctx, query)
		c.mu.Lock()
		delete(c.pending, query)
		c.mu.Unlock()
		if err == nil {
			c.store(query, st)
		}
	}()
	return nil
}

// lookup reports the cached statement, or ok when the cache is full (st is
// then nil and the query runs unprepared).
func (c *stmtCache) lookup(query string) (st *sqlx.Stmt, ok bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	st, ok = c.m[query]
	return st, ok || len(c.m) >= maxStmts
}

func (c *stmtCache) store(query string, st *sqlx.Stmt) *sqlx.Stmt {
	c.mu.Lock()
	defer c.mu.Unlock()
	if prev, ok := c.m[query]; ok || c.closed { // prepared concurrently, or closing
		_ = st.Close()
		return prev
	}
	if c.m == nil {
		c.m = make(map[string]*sqlx.Stmt)
	}
	c.m[query] = st
	return st
}

func (c *stmtCache) close() {
	if c == nil {
		return
	}
	c.mu.Lock()
	c.closed = true // no new background prepare starts
	c.mu.Unlock()
	c.preparing.Wait()
	c.mu.Lock()
	defer c.mu.Unlock()
	for q, st := range c.m {
		_ = st.Close()
		delete(c.m, q)
	}
}
