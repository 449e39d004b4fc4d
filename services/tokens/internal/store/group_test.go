package store

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/gatehouse-id/gatehouse/pkg/db"
	"github.com/gatehouse-id/gatehouse/pkg/logging"
	"github.com/gatehouse-id/gatehouse/services/tokens/migrations"
)

func openSQLite(tb testing.TB) *Store {
	tb.Helper()
	d, err := db.Open(context.Background(), db.Options{DataDir: tb.TempDir(), Service: "tokens",
		Migrations: migrations.FS, Logger: logging.Discard()})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = d.Close() })
	return &Store{DB: d}
}

func record(id string) *AccessToken {
	now := time.Now().UTC().Truncate(time.Second)
	return NewAccessToken(id, []byte("hash-"+id), "client", "user", "org", []string{"openid"}, []string{"client"}, nil,
		now, now.Add(time.Hour))
}

// Concurrent standalone inserts are each committed and readable when they
// return; a record that cannot be stored (a duplicate hash) fails only its
// own insert, not the others grouped with it.
func TestGroupedInserts(t *testing.T) {
	s := openSQLite(t)
	ctx := context.Background()
	if err := s.InsertAccessToken(ctx, nil, record("dup")); err != nil {
		t.Fatal(err)
	}
	const n = 40
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			id := fmt.Sprintf("t%d", i)
			if i%10 == 0 {
				id = "dup"
			}
			errs[i] = s.InsertAccessToken(ctx, nil, record(id))
			if errs[i] == nil {
				if _, err := s.AccessTokenByHash(ctx, []byte("hash-"+id)); err != nil {
					errs[i] = fmt.Errorf("not readable after insert returned: %w", err)
				}
			}
		})
	}
	wg.Wait()
	for i, err := range errs {
		if i%10 == 0 {
			if err == nil {
				t.Errorf("insert %d (duplicate id): got nil; want an error", i)
			}
			continue
		}
		if err != nil {
			t.Errorf("insert %d: got %v; want nil", i, err)
		}
	}
	var count int
	if err := s.DB.Get(ctx, &count, `SELECT COUNT(*) FROM access_tokens`); err != nil {
		t.Fatal(err)
	}
	if want := 1 + n - n/10; count != want {
		t.Errorf("got %d records; want %d", count, want)
	}
}

// A cancelled caller gets its context's error; the group it joined is
// still committed for the others.
func TestGroupedInsertCancelled(t *testing.T) {
	s := openSQLite(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := s.InsertAccessToken(ctx, nil, record("c1"))
	if err != nil && !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v; want nil or context.Canceled", err)
	}
	if err := s.InsertAccessToken(context.Background(), nil, record("c2")); err != nil {
		t.Fatalf("insert after a cancelled one: %v", err)
	}
}

// A writer expecting more records waits for them and commits them
// together; when they do not come it commits what it has and expects fewer,
// so a lone caller is not held up again.
func TestGroupGathersExpectedRecords(t *testing.T) {
	s := openSQLite(t)
	ctx := context.Background()
	var mu sync.Mutex
	var batches []int
	s.group.onCommit = func(n int) {
		mu.Lock()
		batches = append(batches, n)
		mu.Unlock()
	}
	s.group.wait = time.Minute // only arrivals end the wait below
	s.group.expect = 3
	var wg sync.WaitGroup
	for i := range 3 {
		wg.Go(func() {
			if err := s.InsertAccessToken(ctx, nil, record(fmt.Sprintf("g%d", i))); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	mu.Lock()
	got := append([]int(nil), batches...)
	mu.Unlock()
	if len(got) != 1 || got[0] != 3 {
		t.Fatalf("batches %v; want the three records in one commit", got)
	}

	// Three expected, one comes: committed after the wait, and the next
	// lone caller does not wait at all.
	s.group.wait = 20 * time.Millisecond
	if err := s.InsertAccessToken(ctx, nil, record("alone1")); err != nil {
		t.Fatal(err)
	}
	if s.group.expect != 1 {
		t.Fatalf("expectation after a lone commit: %d; want 1", s.group.expect)
	}
	s.group.wait = time.Minute // a wait now would stall the test
	if err := s.InsertAccessToken(ctx, nil, record("alone2")); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(batches) != 3 || batches[1] != 1 || batches[2] != 1 {
		t.Fatalf("batches %v; want [3 1 1]", batches)
	}
}
