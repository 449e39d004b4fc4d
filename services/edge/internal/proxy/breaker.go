package proxy

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
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

// breakerTransport fails fast while its service keeps failing: after
// breakerFailures consecutive transport errors (refused, reset, timed out)
// it answers every request with an error (a 503 with Retry-After from the
// proxy) for breakerOpen, then lets one request probe the service. Any
// HTTP response, whatever its status, is the service answering; a client
// that went away is not the service's failure.
type breakerTransport struct {
	next http.RoundTripper
	cb   *gobreaker.CircuitBreaker[*http.Response]
}

func newBreaker(svc string, next http.RoundTripper, open time.Duration, logger *slog.Logger) *breakerTransport {
	return &breakerTransport{next: next, cb: gobreaker.NewCircuitBreaker[*http.Response](gobreaker.Settings{
		Name:        svc,
		MaxRequests: 1,
		Timeout:     open,
		ReadyToTrip: func(c gobreaker.Counts) bool { return c.ConsecutiveFailures >= breakerFailures },
		IsSuccessful: func(err error) bool {
			return err == nil || errors.Is(err, context.Canceled)
		},
		OnStateChange: func(name string, from, to gobreaker.State) {
			logger.Warn("service circuit breaker", "service", name, "from", from.String(), "to", to.String())
		},
	})}
}

func (b *breakerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	res, err := b.cb.Execute(func() (*http.Response, error) { return b.next.RoundTrip(r) })
	if errors.Is(err, gobreaker.ErrOpenState) || errors.Is(err, gobreaker.ErrTooManyRequests) {
		return nil, errOpen
	}
	return res, err
}
