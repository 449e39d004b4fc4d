package store

import (
	"context"
	"sync"
	"time"

	"github.com/gatehouse-id/gatehouse/pkg/db"
)

// maxGroup bounds one group transaction.
const maxGroup = 64

// gatherWait bounds how long a writer waits for the records it expects
// before committing what it has. A commit costs far more than waiting a
// fraction of it for the callers known to be on their way, which halves
// the commits under steady load.
const gatherWait = 250 * time.Microsecond

// group commits concurrent standalone access-token inserts, and DPoP
// proofs' replay records, together (group commit). Every opaque token is recorded before it is returned, and each
// commit has a fixed cost (on PostgreSQL a round trip and a WAL flush):
// when requests arrive together, one transaction carrying all of their
// records commits them at once. Nobody is answered before the commit that
// holds its record has succeeded; a failed group is retried record by
// record so one bad record fails only its own request.
//
// Under steady load, committing whatever is queued the moment the previous
// commit ends alternates small and large groups: the callers just answered
// come back a little later than the one that queued during the commit. So
// the writer expects as many records as were in flight when the previous
// commit ended (those it committed plus those queued), waits up to
// gatherWait for them, and lowers its expectation when they do not come.
// A lone caller (expectation 1) never waits.
type group struct {
	mu      sync.Mutex
	pending []*groupInsert
	running bool
	expect  int           // records expected in the next batch
	arrived chan struct{} // signalled when a record is queued; nil when no writer waits

	wait     time.Duration // gatherWait unless set (tests)
	onCommit func(n int)   // observes batch sizes (tests)
}

type groupInsert struct {
	// write inserts the record in a group transaction; alone, on its own
	// (after a failed group, so one bad record fails only its request).
	write func(context.Context, db.Querier) error
	alone func(context.Context, *db.DB) error
	done  chan error // buffered: the writer never blocks on a gone caller
}

// insert queues a and waits until it is committed (see add).
func (g *group) insert(ctx context.Context, d *db.DB, a *AccessToken) error {
	write := func(ctx context.Context, q db.Querier) error { return insertAccessToken(ctx, q, a) }
	return g.add(ctx, d, write, func(ctx context.Context, d *db.DB) error { return write(ctx, d) })
}

// add queues a record's write and waits until it is committed. The first caller to
// find no writer running becomes the writer: it commits what is queued
// (its own record included) and, if more arrived meanwhile, hands the
// writing to a new goroutine so its own answer is not held up; callers
// that arrive during a commit are committed together in the next one.
func (g *group) add(ctx context.Context, d *db.DB, write func(context.Context, db.Querier) error,
	alone func(context.Context, *db.DB) error) error {
	p := &groupInsert{write: write, alone: alone, done: make(chan error, 1)}
	g.mu.Lock()
	g.pending = append(g.pending, p)
	lead := !g.running
	g.running = true
	if g.arrived != nil && len(g.pending) >= g.expect {
		close(g.arrived)
		g.arrived = nil
	}
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
	if len(g.pending) < g.expect {
		arrived := make(chan struct{})
		g.arrived = arrived
		g.mu.Unlock()
		wait := g.wait
		if wait == 0 {
			wait = gatherWait
		}
		t := time.NewTimer(wait)
		select {
		case <-arrived:
		case <-t.C:
		}
		t.Stop()
		g.mu.Lock()
		g.arrived = nil
		if len(g.pending) < g.expect {
			g.expect = len(g.pending) // they did not come: expect fewer
		}
	}
	batch := g.pending
	if len(batch) > maxGroup {
		batch = batch[:maxGroup]
	}
	g.pending = g.pending[len(batch):]
	g.mu.Unlock()
	commit(ctx, d, batch)
	if g.onCommit != nil {
		g.onCommit(len(batch))
	}
	g.mu.Lock()
	g.expect = min(len(batch)+len(g.pending), maxGroup)
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
		batch[0].done <- batch[0].alone(ctx, d)
		return
	}
	err := d.InTx(ctx, func(tx *db.Tx) error {
		for _, p := range batch {
			if err := p.write(ctx, tx); err != nil {
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
		p.done <- p.alone(ctx, d)
	}
}
