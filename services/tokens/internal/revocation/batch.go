package revocation

import (
	"context"
	"fmt"
	"sync"
)

// maxBatch bounds the lookups one MGET answers; more wait for the next.
const maxBatch = 64

// batcher lets concurrent lookups share a Redis round trip. While one MGET
// is in flight, lookups that arrive queue; when it returns, the first of
// them sends one MGET for all of them (up to maxBatch) and answers each.
// A queued lookup's MGET is sent after the lookup began, so it still reads
// every revocation acknowledged before its check started: the answers are
// what a round trip of its own would have given, at a fraction of the
// system calls in this process and in Redis (see bench/README).
type batcher struct {
	mget func(ctx context.Context, keys []string) ([]any, error)

	mu    sync.Mutex
	busy  bool    // a round is in flight, or about to be sent by a woken leader
	queue []*call // lookups waiting for the next round
}

// call is one lookup: its keys, and once done is closed, its values or
// the round's error. A call woken with lead set sends the round for batch.
type call struct {
	keys  []string
	vals  []any
	err   error
	lead  bool
	batch []*call
	done  chan struct{}
}

// get returns the values of keys, read in one MGET with other concurrent
// lookups. The round runs detached from ctx (bounded by the client's
// timeouts), since other lookups depend on it.
func (b *batcher) get(ctx context.Context, keys []string) ([]any, error) {
	c := &call{keys: keys, done: make(chan struct{})}
	b.mu.Lock()
	if b.busy {
		b.queue = append(b.queue, c)
		b.mu.Unlock()
		<-c.done
		if !c.lead {
			return c.vals, c.err
		}
	} else {
		b.busy = true
		b.mu.Unlock()
		c.batch = []*call{c}
	}
	b.round(context.WithoutCancel(ctx), c.batch)
	return c.vals, c.err
}

// round sends one MGET for batch, hands the next round to the first
// queued lookup (or marks the batcher idle), then answers batch.
func (b *batcher) round(ctx context.Context, batch []*call) {
	n := 0
	for _, c := range batch {
		n += len(c.keys)
	}
	keys := make([]string, 0, n)
	for _, c := range batch {
		keys = append(keys, c.keys...)
	}
	vals, err := b.safeMGET(ctx, keys)
	if err == nil && len(vals) != len(keys) {
		err = fmt.Errorf("revocation: MGET returned %d values; want %d", len(vals), len(keys))
	}

	b.mu.Lock()
	if len(b.queue) == 0 {
		b.busy = false
	} else {
		k := min(len(b.queue), maxBatch)
		next := b.queue[:k:k]
		b.queue = append([]*call(nil), b.queue[k:]...)
		next[0].lead, next[0].batch = true, next
		close(next[0].done)
	}
	b.mu.Unlock()

	off := 0
	for _, c := range batch {
		if err != nil {
			c.err = err
		} else {
			c.vals = vals[off : off+len(c.keys) : off+len(c.keys)]
			off += len(c.keys)
		}
		if c != batch[0] { // the leader is not waiting
			close(c.done)
		}
	}
}

// safeMGET turns a panic of the client into the round's error: a round
// that never ended would leave the batcher busy and every later check
// waiting.
func (b *batcher) safeMGET(ctx context.Context, keys []string) (vals []any, err error) {
	defer func() {
		if p := recover(); p != nil {
			vals, err = nil, fmt.Errorf("revocation: MGET panicked: %v", p)
		}
	}()
	return b.mget(ctx, keys)
}
