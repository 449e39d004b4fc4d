package proxy

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/sony/gobreaker/v2"
)

// Defaults of the protection against a hung or failing service.
const (
	// ResponseHeaderTimeout bounds the wait for a service's response
	// headers: a frozen process (SIGSTOP, a stuck GC, a partition) must not
	// hold clients for as long as it lasts. The slowest legitimate unary
	// call (an argon2id password check under load) is far below it.
	ResponseHeaderTimeout = 15 * time.Second
	// breakerFailures consecutive transport failures open the breaker.
	breakerFailures = 5
	// breakerOpen is how long an open breaker answers 503 at once before
	// it lets one request through to probe the service.
	breakerOpen = RetryAfterSeconds * time.Second
)

// errOpen is the cause logged while the breaker refuses requests.
var errOpen = errors.New("circuit breaker open: the service failed repeatedly")

// readyProbe is how often an open breaker asks the service's /readyz: a
// service ready again is sent requests at once, not after the rest of
// breakerOpen (under load, the largest part of a rolling restart's outage).
const readyProbe = 200 * time.Millisecond

// breakerTransport fails fast while its service keeps failing: after
// breakerFailures consecutive transport errors (refused, reset, timed out)
// it answers every request with an error (a 503 with Retry-After from the
// proxy) for breakerOpen, then lets one request probe the service. While
// open it also asks the service's readiness (GET ready) every readyProbe,
// and closes as soon as the service says it is ready. Any HTTP response,
// whatever its status, is the service answering; a client that went away
// is not the service's failure.
type breakerTransport struct {
	next     http.RoundTripper
	ready    string // the service's /readyz; "" for no probe
	settings gobreaker.Settings
	logger   *slog.Logger
	cb       atomic.Pointer[gobreaker.CircuitBreaker[*http.Response]]
	probing  atomic.Bool
}

func newBreaker(svc string, next http.RoundTripper, open time.Duration, ready string, logger *slog.Logger) *breakerTransport {
	b := &breakerTransport{next: next, ready: ready, logger: logger}
	b.settings = gobreaker.Settings{
		Name:        svc,
		MaxRequests: 1,
		Timeout:     open,
		ReadyToTrip: func(c gobreaker.Counts) bool { return c.ConsecutiveFailures >= breakerFailures },
		IsSuccessful: func(err error) bool {
			return err == nil || errors.Is(err, context.Canceled)
		},
		OnStateChange: func(name string, from, to gobreaker.State) {
			logger.Warn("service circuit breaker", "service", name, "from", from.String(), "to", to.String())
			if to == gobreaker.StateOpen && b.ready != "" && b.probing.CompareAndSwap(false, true) {
				go b.probe()
			}
		},
	}
	b.cb.Store(gobreaker.NewCircuitBreaker[*http.Response](b.settings))
	return b
}

func (b *breakerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	res, err := b.cb.Load().Execute(func() (*http.Response, error) { return b.next.RoundTrip(r) })
	if errors.Is(err, gobreaker.ErrOpenState) || errors.Is(err, gobreaker.ErrTooManyRequests) {
		return nil, errOpen
	}
	return res, err
}

// probe asks the service's readiness while the breaker is open, and
// replaces the breaker by a closed one once the service is ready. It ends
// when the breaker is no longer open (its own probe request closed it, or
// the service failed that and it opened again, which starts a new probe).
func (b *breakerTransport) probe() {
	defer b.probing.Store(false)
	t := time.NewTicker(readyProbe)
	defer t.Stop()
	for range t.C {
		cb := b.cb.Load()
		if cb.State() != gobreaker.StateOpen {
			return
		}
		if b.isReady() {
			b.cb.CompareAndSwap(cb, gobreaker.NewCircuitBreaker[*http.Response](b.settings))
			b.logger.Warn("service circuit breaker", "service", b.settings.Name, "from", "open", "to", "closed (the service is ready)")
			return
		}
	}
}

func (b *breakerTransport) isReady() bool {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, b.ready, nil)
	if err != nil {
		return false
	}
	res, err := b.next.RoundTrip(req)
	if err != nil {
		return false
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(res.Body, 4<<10))
	_ = res.Body.Close()
	return res.StatusCode == http.StatusOK
}
