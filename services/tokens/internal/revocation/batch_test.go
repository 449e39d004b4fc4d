package revocation

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
)

// fakeMGET answers each key with "<key>@<state>", state being read when
// the round is sent; gate, when set, holds every round until it is
// closed or receives.
type fakeMGET struct {
	state  atomic.Int64
	rounds atomic.Int64
	sizes  chan int
	gate   chan struct{}
	fail   atomic.Bool
	ctxErr chan error
}

func (f *fakeMGET) mget(ctx context.Context, keys []string) ([]any, error) {
	st := f.state.Load()
	f.rounds.Add(1)
	if f.sizes != nil {
		f.sizes <- len(keys)
	}
	if f.gate != nil {
		<-f.gate
	}
	if f.ctxErr != nil {
		f.ctxErr <- ctx.Err()
	}
	if f.fail.Load() {
		return nil, errors.New("redis down")
	}
	out := make([]any, len(keys))
	for i, k := range keys {
		out[i] = fmt.Sprintf("%s@%d", k, st)
	}
	return out, nil
}

// gated returns a fakeMGET whose rounds wait until release is called, as
// the test's end does too: a failed test's lookups then do not deadlock
// its synctest bubble.
func gated(t *testing.T, sizes int) (f *fakeMGET, release func()) {
	f = &fakeMGET{gate: make(chan struct{}), sizes: make(chan int, sizes)}
	release = sync.OnceFunc(func() { close(f.gate) })
	t.Cleanup(release)
	return f, release
}

// wantQueued waits until the bubble's lookups are all blocked (the round
// in flight at the gate, the others queued) and checks n are queued.
func wantQueued(t *testing.T, b *batcher, n int) {
	t.Helper()
	synctest.Wait()
	b.mu.Lock()
	q := len(b.queue)
	b.mu.Unlock()
	if q != n {
		t.Fatalf("%d lookups queued; want %d", q, n)
	}
}

func TestBatcherSharesRoundTrips(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		f, release := gated(t, 100)
		b := &batcher{mget: f.mget}
		ctx := context.Background()
		var wg sync.WaitGroup
		results := make([][]any, 11)
		errs := make([]error, 11)
		wg.Go(func() { results[0], errs[0] = b.get(ctx, []string{"lead", "m"}) })
		if got := <-f.sizes; got != 2 {
			t.Fatalf("first round: %d keys; want 2", got)
		}
		for i := 1; i <= 10; i++ {
			wg.Go(func() { results[i], errs[i] = b.get(ctx, []string{fmt.Sprint("k", i), "m"}) })
		}
		wantQueued(t, b, 10)
		release()
		wg.Wait()
		if got := f.rounds.Load(); got != 2 {
			t.Fatalf("11 concurrent lookups took %d round trips; want 2 (one in flight, one for the 10 queued)", got)
		}
		if got := <-f.sizes; got != 20 {
			t.Fatalf("second round: %d keys; want 20", got)
		}
		for i, r := range results {
			key := "lead"
			if i > 0 {
				key = fmt.Sprint("k", i)
			}
			if errs[i] != nil || len(r) != 2 || r[0] != key+"@0" || r[1] != "m@0" {
				t.Errorf("lookup %d: got %v, %v; want [%s@0 m@0]", i, r, errs[i], key)
			}
		}
		if b.busy || len(b.queue) != 0 {
			t.Fatalf("after the rounds: busy %v, %d queued; want idle", b.busy, len(b.queue))
		}
	})
}

// A lookup that arrives while a round is in flight is not answered by
// that round, which may have read Redis before a revocation the caller
// saw acknowledged: it waits for a round sent after it began.
func TestBatcherQueuedLookupReadsAfterItBegan(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		f, release := gated(t, 10)
		b := &batcher{mget: f.mget}
		ctx := context.Background()
		var wg sync.WaitGroup
		var first []any
		wg.Go(func() { first, _ = b.get(ctx, []string{"x"}) })
		<-f.sizes // the first round has read state 0
		f.state.Store(1)
		var late []any
		wg.Go(func() { late, _ = b.get(ctx, []string{"x"}) })
		wantQueued(t, b, 1)
		release()
		wg.Wait()
		if first[0] != "x@0" || late[0] != "x@1" {
			t.Fatalf("got %v and %v; want x@0 for the round in flight and x@1 for the lookup that began after the change", first, late)
		}
	})
}

func TestBatcherErrorReachesEveryLookup(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		f, release := gated(t, 10)
		f.fail.Store(true)
		b := &batcher{mget: f.mget}
		ctx := context.Background()
		var wg sync.WaitGroup
		errs := make([]error, 4)
		wg.Go(func() { _, errs[0] = b.get(ctx, []string{"a"}) })
		<-f.sizes
		for i := 1; i < 4; i++ {
			wg.Go(func() { _, errs[i] = b.get(ctx, []string{"b"}) })
		}
		wantQueued(t, b, 3)
		release()
		wg.Wait()
		for i, err := range errs {
			if err == nil {
				t.Errorf("lookup %d: no error; want the round's", i)
			}
		}
		f.fail.Store(false)
		f.gate = nil
		if v, err := b.get(ctx, []string{"c"}); err != nil || v[0] != "c@0" {
			t.Fatalf("after the failure: %v, %v; want [c@0]", v, err)
		}
	})
}

func TestBatcherBoundsARound(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		f, release := gated(t, 10)
		b := &batcher{mget: f.mget}
		ctx := context.Background()
		var wg sync.WaitGroup
		wg.Go(func() { _, _ = b.get(ctx, []string{"lead"}) })
		<-f.sizes
		n := maxBatch + 10
		for i := range n {
			wg.Go(func() {
				if v, err := b.get(ctx, []string{fmt.Sprint(i)}); err != nil || v[0] != fmt.Sprint(i, "@0") {
					t.Errorf("lookup %d: %v, %v", i, v, err)
				}
			})
		}
		wantQueued(t, b, n)
		release()
		wg.Wait()
		close(f.sizes)
		var sizes []int
		for s := range f.sizes {
			sizes = append(sizes, s)
		}
		if len(sizes) != 2 || sizes[0] != maxBatch || sizes[1] != 10 {
			t.Fatalf("rounds after the first: %v keys; want [%d 10]", sizes, maxBatch)
		}
	})
}

// The round does not end with its leader's request: a lookup whose
// caller went away still sends a round the others depend on.
func TestBatcherRoundOutlivesLeadersContext(t *testing.T) {
	f := &fakeMGET{ctxErr: make(chan error, 1)}
	b := &batcher{mget: f.mget}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := b.get(ctx, []string{"a"}); err != nil {
		t.Fatal(err)
	}
	if err := <-f.ctxErr; err != nil {
		t.Fatalf("the round ran with a cancelled context: %v", err)
	}
}

func TestBatcherSurvivesAPanickingClient(t *testing.T) {
	panics := true
	b := &batcher{mget: func(ctx context.Context, keys []string) ([]any, error) {
		if panics {
			panic("client bug")
		}
		return []any{"ok"}, nil
	}}
	if _, err := b.get(context.Background(), []string{"a"}); err == nil {
		t.Fatal("a panicking round answered without an error")
	}
	panics = false
	if v, err := b.get(context.Background(), []string{"a"}); err != nil || v[0] != "ok" {
		t.Fatalf("after a panicking round: %v, %v; want [ok]", v, err)
	}
}
