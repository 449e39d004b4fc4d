package ratelimit

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/gatehouse-id/gatehouse/pkg/testutil"
	"github.com/gatehouse-id/gatehouse/services/edge/internal/edgetest"
)

func TestRedisBurstThenDeny(t *testing.T) {
	client, prefix := testutil.Redis(t)
	r, err := NewRedis(client, prefix, 1, 3, nil)
	if err != nil {
		t.Fatalf("NewRedis: %v", err)
	}
	for i, wantRemaining := range []int{2, 1, 0} {
		d := allow(t, r, "client-a")
		if !d.Allowed || d.Remaining != wantRemaining || d.Limit != 3 {
			t.Fatalf("request %d: got %+v; want allowed, remaining %d, limit 3", i, d, wantRemaining)
		}
	}
	// At 1/s a refill between these calls is possible on a slow machine,
	// but not between all of them.
	var denied *Decision
	for range 7 {
		if d := allow(t, r, "client-a"); !d.Allowed {
			denied = &d
			break
		}
	}
	if denied == nil {
		t.Fatal("10 requests in a row at burst 3, 1/s: none denied")
	}
	if denied.RetryAfter <= 0 || denied.Remaining != 0 {
		t.Fatalf("denied: got %+v; want RetryAfter > 0 and nothing remaining", *denied)
	}
	if d := allow(t, r, "client-b"); !d.Allowed {
		t.Fatalf("another key was limited: %+v", d)
	}

	ctx := context.Background()
	if n := client.Exists(ctx, prefix+"client-a").Val(); n != 1 {
		t.Fatalf("key %q: exists %d; want the state stored under the prefix", prefix+"client-a", n)
	}
	if n := client.Exists(ctx, "rate:"+prefix+"client-a").Val(); n != 0 {
		t.Fatalf("state also stored outside the prefix")
	}
}

func TestRedisReplicasShareTheBudget(t *testing.T) {
	client, prefix := testutil.Redis(t)
	one, _ := NewRedis(client, prefix, 1, 2, nil)
	two, _ := NewRedis(client, prefix, 1, 2, nil)
	allow(t, one, "k")
	allow(t, two, "k")
	for range 5 {
		if d := allow(t, one, "k"); !d.Allowed {
			return
		}
	}
	t.Fatal("two limiters on one Redis prefix did not share the burst")
}

func TestRedisDownFailsOpen(t *testing.T) {
	var logs bytes.Buffer
	logger := slog.New(slog.NewJSONHandler(&logs, nil))
	client := redis.NewClient(&redis.Options{Addr: edgetest.ClosedAddr(t), MaxRetries: -1})
	t.Cleanup(func() { _ = client.Close() })
	calls := &countHook{}
	client.AddHook(calls)
	r, err := NewRedis(client, "edge:", 1, 1, logger)
	if err != nil {
		t.Fatalf("NewRedis: %v", err)
	}
	c := &clock{t: time.Unix(1_800_000_000, 0)}
	r.now = c.now
	for i := range 3 {
		d, err := r.Allow(context.Background(), "k")
		if err != nil || !d.Allowed || d.Limit != 0 {
			t.Fatalf("request %d with Redis down: got %+v, %v; want allowed, unknown limit, nil error", i, d, err)
		}
	}
	if n := calls.n.Load(); n != 1 {
		t.Fatalf("Redis asked %d times during the backoff; want once", n)
	}
	c.advance(RedisBackoff)
	if d, _ := r.Allow(context.Background(), "k"); !d.Allowed {
		t.Fatalf("after backoff with Redis still down: got %+v; want allowed", d)
	}
	if n := calls.n.Load(); n != 2 {
		t.Fatalf("Redis asked %d times; want a retry after the backoff", n)
	}
	if n := strings.Count(logs.String(), `"level":"WARN"`); n != 1 {
		t.Fatalf("got %d warn lines (%s); want exactly one per interval", n, logs.String())
	}
}

// countHook counts commands sent (or attempted) to Redis.
type countHook struct{ n atomic.Int32 }

func (h *countHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *countHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.n.Add(1)
		return next(ctx, cmd)
	}
}

func (h *countHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func TestNewRedisRejectsBadArguments(t *testing.T) {
	client := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer client.Close()
	if _, err := NewRedis(nil, "p", 1, 1, nil); err == nil {
		t.Error("nil client: got nil error")
	}
	if _, err := NewRedis(client, "p", 0, 1, nil); err == nil {
		t.Error("rate 0: got nil error")
	}
	if _, err := NewRedis(client, "p", 1, 0, nil); err == nil {
		t.Error("burst 0: got nil error")
	}
}

// TestRedisDownFallsBackToMemory: with the default fallback an outage of
// Redis does not lift the limit — each replica enforces it in process —
// and Degraded says so until Redis answers again.
func TestRedisDownFallsBackToMemory(t *testing.T) {
	client := redis.NewClient(&redis.Options{Addr: edgetest.ClosedAddr(t), MaxRetries: -1})
	t.Cleanup(func() { _ = client.Close() })
	r, err := NewRedis(client, "edge:", 1, 1, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	mem, err := NewMemory(1, 1)
	if err != nil {
		t.Fatal(err)
	}
	r.Fallback = mem
	if r.Degraded() {
		t.Fatal("degraded before any failure")
	}
	if d, _ := r.Allow(context.Background(), "k"); !d.Allowed {
		t.Fatalf("first request: %+v; want allowed", d)
	}
	if !r.Degraded() {
		t.Fatal("not degraded after Redis failed")
	}
	if d, _ := r.Allow(context.Background(), "k"); d.Allowed || d.RetryAfter <= 0 {
		t.Fatalf("second request within the burst of 1: %+v; want denied by the in-process fallback", d)
	}
}

// TestRedisWithLimit: a sibling keeps its own rate and burst but shares the
// view of Redis's health: after one fails, neither asks Redis during the
// backoff, and the outage is logged once.
func TestRedisWithLimit(t *testing.T) {
	client, prefix := testutil.Redis(t)
	strict, err := NewRedis(client, prefix, 1, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	loose, err := strict.WithLimit(1, 5)
	if err != nil {
		t.Fatal(err)
	}
	allow(t, strict, "strict:k")
	if d := allow(t, strict, "strict:k"); d.Allowed {
		t.Fatalf("strict, second request: %+v; want denied at burst 1", d)
	}
	for i := range 4 {
		if d := allow(t, loose, "loose:k"); !d.Allowed || d.Limit != 5 {
			t.Fatalf("loose, request %d: %+v; want allowed with limit 5", i, d)
		}
	}
	if _, err := strict.WithLimit(0, 1); err == nil {
		t.Error("WithLimit(0, 1): got nil error")
	}
}

func TestRedisWithLimitSharesOutage(t *testing.T) {
	var logs bytes.Buffer
	client := redis.NewClient(&redis.Options{Addr: edgetest.ClosedAddr(t), MaxRetries: -1})
	t.Cleanup(func() { _ = client.Close() })
	calls := &countHook{}
	client.AddHook(calls)
	a, err := NewRedis(client, "edge:", 1, 1, slog.New(slog.NewJSONHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	c := &clock{t: time.Unix(1_800_000_000, 0)}
	a.now = c.now
	b, err := a.WithLimit(10, 20)
	if err != nil {
		t.Fatal(err)
	}
	allow(t, a, "a:k")
	for range 3 {
		if d := allow(t, b, "b:k"); !d.Allowed {
			t.Fatalf("b during the outage: %+v; want allowed (fail open)", d)
		}
	}
	if n := calls.n.Load(); n != 1 {
		t.Fatalf("Redis asked %d times; want once: b shares a's backoff", n)
	}
	if !b.Degraded() {
		t.Fatal("b is not degraded after a's failure")
	}
	c.advance(RedisBackoff)
	allow(t, b, "b:k")
	if n := calls.n.Load(); n != 2 {
		t.Fatalf("Redis asked %d times; want a retry after the backoff", n)
	}
	if n := strings.Count(logs.String(), `"level":"WARN"`); n != 1 {
		t.Fatalf("got %d warn lines; want one for the shared outage:\n%s", n, logs.String())
	}
}

// countingHook counts the commands a Redis client sends.
type countingHook struct{ n atomic.Int64 }

func (h *countingHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *countingHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.n.Add(1)
		return next(ctx, cmd)
	}
}
func (h *countingHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// A busy key takes its permits in leases: far fewer round trips than
// requests, and two replicas together still let no more pass than the
// budget (burst plus the rate over the elapsed time); past the budget, a
// refusal is repeated without Redis until its RetryAfter.
func TestRedisLeasesForBusyKeys(t *testing.T) {
	t.Parallel()
	client, prefix := testutil.Redis(t)
	hook := &countingHook{}
	client.AddHook(hook)
	run := func(rate, burst, rounds int) (requests, allowed, budget int, calls int64) {
		t.Helper()
		key := fmt.Sprintf("busy-%d", rate)
		one, _ := NewRedis(client, prefix, rate, burst, nil)
		two, _ := NewRedis(client, prefix, rate, burst, nil)
		before, start := hook.n.Load(), time.Now()
		for range rounds {
			for _, r := range []*Redis{one, two} {
				requests++
				if d := allow(t, r, key); d.Allowed {
					allowed++
				} else if d.RetryAfter <= 0 {
					t.Fatalf("refused without RetryAfter: %+v", d)
				}
			}
		}
		elapsed := time.Since(start)
		budget = burst + int(float64(rate)*elapsed.Seconds()) + 1
		if allowed > budget {
			t.Fatalf("rate %d burst %d: %d requests allowed in %v; the budget is %d", rate, burst, allowed, elapsed, budget)
		}
		return requests, allowed, budget, hook.n.Load() - before
	}
	// Within the budget: every request passes, in leases.
	requests, allowed, _, calls := run(1000000, 2000, 1500)
	if allowed != requests || calls > int64(requests/10) {
		t.Fatalf("within the budget: %d of %d allowed with %d Redis commands; want all, with leases cutting the commands", allowed, requests, calls)
	}
	t.Logf("within the budget: %d requests, %d Redis commands", requests, calls)
	// Far past it: the burst passes, then refusals are remembered.
	requests, allowed, budget, calls := run(10, 400, 1500)
	if allowed < 400/2 || calls > int64(requests/10) {
		t.Fatalf("past the budget: %d of %d allowed (budget %d) with %d Redis commands; want the burst, with few commands", allowed, requests, budget, calls)
	}
	t.Logf("past the budget: %d requests, %d allowed (budget %d), %d Redis commands", requests, allowed, budget, calls)

	// A key asked for rarely asks Redis every time. Its leases lapse by
	// the limiter's clock (GCRA runs on Redis's), so that clock is moved
	// rather than slept on.
	r, _ := NewRedis(client, prefix, 100, 400, nil)
	c := &clock{t: time.Now()}
	r.now = c.now
	before := hook.n.Load()
	for range 3 {
		allow(t, r, "rare")
		c.advance(2 * leaseTTL)
	}
	if got := hook.n.Load() - before; got < 3 {
		t.Fatalf("3 spaced requests made %d Redis commands; want one each", got)
	}
}

// Concurrent requests of one key take one lease at a time: together they
// never take more than the budget, and a generous budget refuses nothing.
func TestRedisLeasesConcurrent(t *testing.T) {
	client, prefix := testutil.Redis(t)
	r, _ := NewRedis(client, prefix, 100000, 100000, nil)
	var refused atomic.Int64
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for range 2000 {
				d, err := r.Allow(context.Background(), "hot")
				if err != nil || !d.Allowed {
					refused.Add(1)
				}
			}
		})
	}
	wg.Wait()
	if n := refused.Load(); n > 0 {
		t.Fatalf("%d of 32000 requests refused at a budget of 100000 (burst) and 100000/s", n)
	}
}

// A frozen Redis (it accepts connections and never answers, as under
// SIGSTOP) costs a request at most about RedisTimeout: the client made
// from ClientOptions gives up on the call's deadline, and the fallback
// decides. With go-redis's defaults a request waited its 3 s read timeout.
func TestFrozenRedisCostsAtMostTheTimeout(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		var held []net.Conn // accepted, never answered
		defer func() {
			for _, c := range held {
				_ = c.Close()
			}
		}()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			held = append(held, c)
		}
	}()
	opts, err := ClientOptions("redis://" + ln.Addr().String() + "/0")
	if err != nil {
		t.Fatal(err)
	}
	client := redis.NewClient(opts)
	t.Cleanup(func() { _ = client.Close() })
	r, err := NewRedis(client, "edge:", 1, 1, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	r.Fallback, _ = NewMemory(1, 1)
	start := time.Now()
	d, err := r.Allow(context.Background(), "k")
	took := time.Since(start)
	if err != nil || !d.Allowed || took > 4*RedisTimeout {
		t.Fatalf("frozen Redis: %+v, %v after %v; want the fallback's answer within about %v", d, err, took, RedisTimeout)
	}
}
