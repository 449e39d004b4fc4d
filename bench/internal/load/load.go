package load

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// NewClient returns an HTTP/1.1 keep-alive client that keeps up to
// concurrency idle connections (one per worker, so no request pays for a
// new connection after the first) and refuses to dial anything but a
// loopback address.
func NewClient(concurrency int) *http.Client {
	d := &net.Dialer{Timeout: 5 * time.Second, Control: loopbackOnly}
	p := new(http.Protocols)
	p.SetHTTP1(true)
	return &http.Client{
		Timeout: 30 * time.Second,
		Transport: &http.Transport{
			DialContext:         d.DialContext,
			Protocols:           p,
			MaxIdleConns:        concurrency * 2,
			MaxIdleConnsPerHost: concurrency * 2,
			IdleConnTimeout:     time.Minute,
			DisableCompression:  true,
		},
		// Redirects would hide what the server answered.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// ErrNotLoopback is returned when a dial targets a non-loopback address.
var ErrNotLoopback = errors.New("refusing to dial a non-loopback address")

func loopbackOnly(network, address string, _ syscall.RawConn) error {
	host, _, err := net.SplitHostPort(address)
	if err != nil {
		return err
	}
	ip := net.ParseIP(host)
	if ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("%w: %s %s", ErrNotLoopback, network, address)
	}
	return nil
}

// Request builds one request; it is called once per request so bodies are
// fresh readers.
type Request func(ctx context.Context) (*http.Request, error)

// Check validates a 2xx response's body; a non-nil error counts the
// request as failed. Non-2xx answers are failures before Check runs.
type Check func(body []byte) error

// Options are a run's size.
type Options struct {
	Client      *http.Client
	Requests    int // total requests
	Concurrency int // workers, each with its own keep-alive connection
}

// Result is what one run observed.
type Result struct {
	Requests   int             // requests completed (successful or not)
	Errors     int             // transport errors, non-2xx answers and failed checks
	FirstError string          // the first failure, for the report
	Statuses   map[int]int     // count per HTTP status received
	Elapsed    time.Duration   // wall time of the whole run
	Latencies  []time.Duration // every completed request's latency, sorted
}

// Add is r and o together: two runs of one operation counted as one, their
// wall times summed.
func (r Result) Add(o Result) Result {
	out := Result{Requests: r.Requests + o.Requests, Errors: r.Errors + o.Errors, FirstError: r.FirstError,
		Elapsed: r.Elapsed + o.Elapsed, Statuses: make(map[int]int, len(r.Statuses)+len(o.Statuses))}
	if out.FirstError == "" {
		out.FirstError = o.FirstError
	}
	for _, m := range []map[int]int{r.Statuses, o.Statuses} {
		for code, n := range m {
			out.Statuses[code] += n
		}
	}
	out.Latencies = append(append(make([]time.Duration, 0, len(r.Latencies)+len(o.Latencies)), r.Latencies...), o.Latencies...)
	slices.Sort(out.Latencies)
	return out
}

// PerSecond is the run's throughput.
func (r Result) PerSecond() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(r.Requests) / r.Elapsed.Seconds()
}

// Percentile returns the nearest-rank p-th percentile (0 < p <= 100) of
// the latencies, or 0 when there are none.
func (r Result) Percentile(p float64) time.Duration {
	n := len(r.Latencies)
	if n == 0 {
		return 0
	}
	rank := int(math.Ceil(p / 100 * float64(n)))
	rank = min(max(rank, 1), n)
	return r.Latencies[rank-1]
}

// Op is one measured operation: a single request, or a sequence of them
// (a whole browser login). It returns the last HTTP status received (0 for
// none) and an error when the operation failed.
type Op func(ctx context.Context) (status int, err error)

// Run sends o.Requests requests built by newReq from o.Concurrency workers
// and waits for them. It stops early, returning ctx's error with what was
// measured so far, when ctx is done.
func Run(ctx context.Context, o Options, newReq Request, check Check) (Result, error) {
	if o.Client == nil {
		return Result{}, errors.New("load: no client")
	}
	return RunOp(ctx, o, RequestOp(o.Client, newReq, check))
}

// RequestOp is the operation of sending one request built by newReq with c
// and checking its answer.
func RequestOp(c *http.Client, newReq Request, check Check) Op {
	return func(ctx context.Context) (int, error) { return do(ctx, c, newReq, check) }
}

// RunOp is Run for operations that are more than one request: o.Requests
// runs of op from o.Concurrency workers (o.Client is not used).
func RunOp(ctx context.Context, o Options, op Op) (Result, error) {
	if o.Requests < 0 || o.Concurrency < 1 {
		return Result{}, fmt.Errorf("load: invalid options (requests %d, concurrency %d)", o.Requests, o.Concurrency)
	}
	var (
		next    atomic.Int64
		mu      sync.Mutex
		res     = Result{Statuses: map[int]int{}, Latencies: make([]time.Duration, 0, o.Requests)}
		wg      sync.WaitGroup
		workers = min(o.Concurrency, max(o.Requests, 1))
	)
	record := func(lat time.Duration, status int, err error) {
		mu.Lock()
		defer mu.Unlock()
		res.Requests++
		res.Latencies = append(res.Latencies, lat)
		if status != 0 {
			res.Statuses[status]++
		}
		if err != nil {
			res.Errors++
			if res.FirstError == "" {
				res.FirstError = err.Error()
			}
		}
	}
	start := time.Now()
	for range workers {
		wg.Go(func() {
			for next.Add(1) <= int64(o.Requests) && ctx.Err() == nil {
				t0 := time.Now()
				status, err := op(ctx)
				if ctx.Err() != nil && err != nil {
					return // cut off by the deadline: neither a result nor a failure
				}
				record(time.Since(t0), status, err)
			}
		})
	}
	wg.Wait()
	res.Elapsed = time.Since(start)
	slices.Sort(res.Latencies)
	return res, ctx.Err()
}

// do sends one request and reads the whole body, so the connection is
// reused.
func do(ctx context.Context, c *http.Client, newReq Request, check Check) (int, error) {
	req, err := newReq(ctx)
	if err != nil {
		return 0, fmt.Errorf("build request: %w", err)
	}
	res, err := c.Do(req)
	if err != nil {
		return 0, err
	}
	body, err := io.ReadAll(res.Body)
	res.Body.Close()
	if err != nil {
		return res.StatusCode, fmt.Errorf("read body: %w", err)
	}
	if res.StatusCode < 200 || res.StatusCode > 299 {
		return res.StatusCode, fmt.Errorf("%s %s: HTTP %d: %s", req.Method, req.URL.Path, res.StatusCode, snippet(body))
	}
	if check != nil {
		if err := check(body); err != nil {
			return res.StatusCode, fmt.Errorf("%s %s: %w", req.Method, req.URL.Path, err)
		}
	}
	return res.StatusCode, nil
}

// snippet shortens a response body for an error message.
func snippet(b []byte) string {
	s := strings.TrimSpace(string(b))
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return s
}
