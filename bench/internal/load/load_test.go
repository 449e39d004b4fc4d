package load

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestRunCountsEveryRequestAndEveryFailure(t *testing.T) {
	var (
		mu    sync.Mutex
		conns = map[string]bool{}
		n     int
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		conns[r.RemoteAddr] = true
		n++
		i := n
		mu.Unlock()
		switch {
		case i%10 == 0:
			http.Error(w, "boom", http.StatusServiceUnavailable)
		case i%10 == 5:
			_, _ = w.Write([]byte("bad"))
		default:
			_, _ = w.Write([]byte("good"))
		}
	}))
	defer srv.Close()

	const total, workers = 100, 4
	res, err := Run(context.Background(), Options{Client: NewClient(workers), Requests: total, Concurrency: workers},
		func(ctx context.Context) (*http.Request, error) {
			return http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/x", nil)
		},
		func(body []byte) error {
			if string(body) != "good" {
				return errors.New("unexpected body " + string(body))
			}
			return nil
		})
	if err != nil {
		t.Fatal(err)
	}
	if res.Requests != total || len(res.Latencies) != total {
		t.Fatalf("got %d requests, %d latencies; want %d", res.Requests, len(res.Latencies), total)
	}
	if res.Errors != 20 {
		t.Fatalf("got %d errors; want 20 (10 non-2xx, 10 failed checks)", res.Errors)
	}
	if res.Statuses[200] != 90 || res.Statuses[503] != 10 {
		t.Fatalf("got statuses %v; want 90×200, 10×503", res.Statuses)
	}
	if res.FirstError == "" {
		t.Fatal("FirstError is empty")
	}
	// Keep-alive: the workers reuse their connections. Not exactly one
	// each: net/http puts a connection back in the idle pool a moment after
	// its body's last byte was read, and a worker's next request that
	// comes first dials another (rarely, so a few more than workers). One
	// per request would be no reuse at all.
	if len(conns) > total/4 {
		t.Fatalf("got %d connections for %d requests by %d workers; want keep-alive reuse", len(conns), total, workers)
	}
	for i := 1; i < len(res.Latencies); i++ {
		if res.Latencies[i] < res.Latencies[i-1] {
			t.Fatal("latencies are not sorted")
		}
	}
}

func TestAddCountsBothRuns(t *testing.T) {
	a := Result{Requests: 2, Errors: 1, FirstError: "first", Statuses: map[int]int{200: 1, 500: 1}, Elapsed: time.Second,
		Latencies: []time.Duration{1, 4}}
	b := Result{Requests: 3, Errors: 1, FirstError: "second", Statuses: map[int]int{200: 2, 401: 1}, Elapsed: 2 * time.Second,
		Latencies: []time.Duration{2, 3, 5}}
	got := a.Add(b)
	want := Result{Requests: 5, Errors: 2, FirstError: "first", Statuses: map[int]int{200: 3, 401: 1, 500: 1}, Elapsed: 3 * time.Second,
		Latencies: []time.Duration{1, 2, 3, 4, 5}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Add = %+v; want %+v", got, want)
	}
	if got := (Result{}).Add(b); got.FirstError != "second" || got.Requests != 3 {
		t.Errorf("empty Add = %+v; want b", got)
	}
}

func TestPercentileNearestRank(t *testing.T) {
	var r Result
	for i := 1; i <= 200; i++ {
		r.Latencies = append(r.Latencies, time.Duration(i)*time.Millisecond)
	}
	for _, c := range []struct {
		p    float64
		want time.Duration
	}{{50, 100 * time.Millisecond}, {99, 198 * time.Millisecond}, {100, 200 * time.Millisecond}, {0.1, time.Millisecond}} {
		if got := r.Percentile(c.p); got != c.want {
			t.Errorf("Percentile(%v) = %v; want %v", c.p, got, c.want)
		}
	}
	if got := (Result{}).Percentile(50); got != 0 {
		t.Errorf("empty Percentile = %v; want 0", got)
	}
}

func TestClientRefusesNonLoopback(t *testing.T) {
	// 192.0.2.1 is TEST-NET-1: the refusal happens before any packet leaves.
	_, err := NewClient(1).Get("http://192.0.2.1:9/")
	if !errors.Is(err, ErrNotLoopback) {
		t.Fatalf("got %v; want ErrNotLoopback", err)
	}
}

func TestRunStopsAtDeadline(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer srv.Close()
	ctx, cancel := context.WithCancel(context.Background())
	var sent int
	var mu sync.Mutex
	res, err := Run(ctx, Options{Client: NewClient(1), Requests: 1000, Concurrency: 1},
		func(ctx context.Context) (*http.Request, error) {
			mu.Lock()
			sent++
			if sent == 10 {
				cancel()
			}
			mu.Unlock()
			return http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, strings.NewReader(""))
		}, nil)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v; want context.Canceled", err)
	}
	if res.Requests != 9 || res.Errors != 0 {
		t.Fatalf("got %d requests, %d errors; want 9 completed before the cancel, 0 errors", res.Requests, res.Errors)
	}
}

// TestRunOpCountsOperations: an operation of several requests is measured
// as one, with its last status, and a failed one counts as one error.
func TestRunOpCountsOperations(t *testing.T) {
	var n atomic.Int32
	res, err := RunOp(context.Background(), Options{Requests: 30, Concurrency: 3}, func(context.Context) (int, error) {
		if n.Add(1)%10 == 0 {
			return 400, errors.New("step 2: HTTP 400")
		}
		return 200, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.Requests != 30 || res.Errors != 3 || res.Statuses[200] != 27 || res.Statuses[400] != 3 || len(res.Latencies) != 30 {
		t.Fatalf("got %d operations, %d errors, statuses %v, %d latencies; want 30, 3, 27×200 3×400, 30",
			res.Requests, res.Errors, res.Statuses, len(res.Latencies))
	}
	if _, err := Run(context.Background(), Options{Requests: 1, Concurrency: 1}, nil, nil); err == nil {
		t.Fatal("Run without a client succeeded; want an error")
	}
}
