package e2e

import (
	"context"
	"net/http"
	"syscall"
	"testing"
	"time"
)

// TestFaultRedisFlush: FLUSHALL three times under load, a second apart.
// The tokens service rebuilds its revocation list from PostgreSQL before
// it trusts a miss again, and edge's rate limiter starts over: nothing
// fails.
func TestFaultRedisFlush(t *testing.T) {
	requireFaultSuite(t)
	c := startFaultCluster(t, 0)
	l := c.startLoad()
	admin := c.redis.client(0)
	defer admin.Close()
	first := time.Now()
	for i := range 3 {
		if i > 0 {
			time.Sleep(time.Second)
		}
		if err := admin.FlushAll(context.Background()).Err(); err != nil {
			t.Fatalf("FLUSHALL: %v", err)
		}
	}
	last := time.Now()
	l.awaitRecovery("recovery from the last FLUSHALL", last)
	l.finish(first, last)
	l.requireStatuses("Redis flushed, until recovered", first, time.Now(), "200", "302")
}

// TestFaultRedisRestart: Redis stopped under load for 4 s and started
// again, empty. Revocations are checked against PostgreSQL while Redis is
// down and the list is rebuilt after; edge's rate limiter falls back to
// memory: clients notice nothing.
func TestFaultRedisRestart(t *testing.T) {
	requireFaultSuite(t)
	c := startFaultCluster(t, 0)
	l := c.startLoad()
	down := time.Now()
	c.redis.stop(syscall.SIGTERM)
	time.Sleep(4 * time.Second)
	up := time.Now()
	c.redis.start()
	l.awaitRecovery("recovery from the start of Redis", up)
	l.finish(down, up)
	l.requireStatuses("Redis down, until recovered", down, time.Now(), "200", "302")
}

// TestFaultRedisStaleSnapshot: under load, Redis saves a snapshot, more
// tokens are revoked, Redis crashes and starts again from that older
// snapshot, which has the list's "loaded" marker without the newer
// revocations. Not one of them may be reported active, neither at once
// nor later, and clients notice nothing else either.
func TestFaultRedisStaleSnapshot(t *testing.T) {
	requireFaultSuite(t)
	c := startFaultCluster(t, 0)
	l := c.startLoad()
	rdb := c.redis.client(0)
	defer rdb.Close()
	ctx := context.Background()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		n, err := rdb.Exists(ctx, rvMarker).Result()
		if err == nil && n == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("before the snapshot: the revocation list's marker exists %d (%v); want the list loaded", n, err)
		}
	}
	if err := rdb.Save(ctx).Err(); err != nil {
		t.Fatalf("SAVE: %v", err)
	}
	saved := time.Now()
	time.Sleep(3 * time.Second)
	crash := time.Now()
	c.redis.stop(syscall.SIGKILL)
	after := l.revokedBetween(saved, crash)
	if len(after) == 0 {
		t.Fatal("no revocation was acknowledged between the snapshot and the crash: the test proves nothing")
	}
	up := time.Now()
	c.redis.start()
	// At once, from the test too: every revocation the snapshot lacks.
	for _, tok := range after {
		status, body := l.introspectNow(tok)
		if status == http.StatusOK && introspectionProblem(body, tok.m, 2) != "" {
			t.Errorf("right after Redis came back from the older snapshot: %s", introspectionProblem(body, tok.m, 2))
		}
	}
	t.Logf("%d revocations acknowledged after the snapshot checked right after the restart", len(after))
	l.awaitRecovery("recovery from the start of Redis", up)
	l.finish(crash, up)
	l.requireStatuses("Redis crashed and restored, until recovered", crash, time.Now(), "200", "302")
}
