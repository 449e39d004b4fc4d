package store

import (
	"context"
	"sync"

	"github.com/gatehouse-id/gatehouse/pkg/db"
)

// maxGroup bounds one group transaction.
const maxGroup = 64

// group commits concurrent standalone access-token inserts together (group
// commit). Every opaque token is recorded before it is returned, and with
// SQLite's synchronous(FULL) each commit costs an fsync: when requests
// arrive together, one transaction carrying all of their records makes
// them durable with one commit. Nobody is answered before the commit that
// holds its record has succeeded, so durability is unchanged; a failed group
// is retried record by record so one bad record fails only its own request.
type group struct {
	mu      sync.Mutex
	pending []*groupInsert
	running bool
}

type groupInsert struct {
	a    *AccessToken
	done chan error // buffered: the writer never blocks on a gone caller
}

// insert queues a and waits until it is committed. The first caller to
// find no writer running becomes the writer: it commits what is queued
// (its own record included) and, if more arrived meanwhile, hands the
// writing to a new goroutine so its own answer is not held up; callers
// that arrive during a commit are committed together in the next one.
func (g *group) insert(ctx context.Context, d *db.DB, a *AccessToken) error {
	p := &groupInsert{a: a, done: make(chan error, 1)}
	g.mu.Lock()
	g.pending = append(g.pending, p)
	lead := !g.running
	g.running = true
	g.mu.Unlock()
	if lead {
		// The batch holds other requests' records: the caller's
		// cancellation must not roll them back.
		g.write(context.WithoutCancel(ctx), d)
	}
	select {
	case err := <-p.done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// write commits one batch of queued inserts, then passes the writing on
// while any are left.
func (g *group) write(ctx context.Context, d *db.DB) {
	g.mu.Lock()
	batch := g.pending
	if len(batch) > maxGroup {
		batch = batch[:maxGroup]
	}
	g.pending = g.pending[len(batch):]
	g.mu.Unlock()
	commit(ctx, d, batch)
	g.mu.Lock()
	more := len(g.pending) > 0
	if !more {
		g.running = false
		g.pending = nil
	}
	g.mu.Unlock()
	if more {
		go g.write(ctx, d)
	}
}

func commit(ctx context.Context, d *db.DB, batch []*groupInsert) {
	if len(batch) == 1 {
		batch[0].done <- insertAccessToken(ctx, d, batch[0].a)
		return
	}
	err := d.InTx(ctx, func(tx *db.Tx) error {
		for _, p := range batch {
			if err := insertAccessToken(ctx, tx, p.a); err != nil {
				return err
			}
		}
		return nil
	})
	if err == nil {
		for _, p := range batch {
			p.done <- nil
		}
		return
	}
	for _, p := range batch {
		p.done <- insertAccessToken(ctx, d, p.a)
	}
}
