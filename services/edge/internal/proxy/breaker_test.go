package proxy

import (
	"cmp"
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// fakeService is a transport to a service, without the network, so the
// breaker runs in a synctest bubble on its fake clock: while down every
// request fails (with fail, or as a refused connection); otherwise it
// answers status (200 when 0), and its /readyz 200 once ready. gate, when
// set, holds requests until it is closed.
type fakeService struct {
	down, ready   atomic.Bool
	calls, probes atomic.Int32 // requests, and readiness checks
	status        int
	fail          error
	gate          chan struct{}
}

func (s *fakeService) RoundTrip(r *http.Request) (*http.Response, error) {
	status := cmp.Or(s.status, http.StatusOK)
	if r.URL.Path == "/readyz" {
		s.probes.Add(1)
		if !s.ready.Load() {
			status = http.StatusServiceUnavailable
		}
	} else {
		s.calls.Add(1)
		if s.gate != nil {
			<-s.gate
		}
	}
	if s.down.Load() {
		return nil, cmp.Or(s.fail, errors.New("connection refused"))
	}
	return &http.Response{StatusCode: status, Body: io.NopCloser(strings.NewReader("")), Request: r}, nil
}

const readyURL = "http://tokens.internal/readyz"

// through sends one request through b and reports whether it reached the
// service, and its error.
func through(t *testing.T, b *breakerTransport, svc *fakeService) (called bool, err error) {
	t.Helper()
	before := svc.calls.Load()
	req, _ := http.NewRequest(http.MethodGet, "http://tokens.internal/oauth/v2/keys", nil)
	res, err := b.RoundTrip(req)
	if err == nil {
		_ = res.Body.Close()
	}
	return svc.calls.Load() != before, err
}

// open fails breakerFailures requests in a row, which opens b.
func open(t *testing.T, b *breakerTransport, svc *fakeService) {
	t.Helper()
	svc.down.Store(true)
	for i := range breakerFailures {
		if called, err := through(t, b, svc); !called || err == nil || errors.Is(err, errOpen) {
			t.Fatalf("failing request %d: called %v, %v; want the service's error", i, called, err)
		}
	}
	if called, err := through(t, b, svc); called || !errors.Is(err, errOpen) {
		t.Fatalf("after %d failures: called %v, %v; want errOpen without a call", breakerFailures, called, err)
	}
}

var quiet = slog.New(slog.DiscardHandler)

// An open breaker refuses for its open time, then lets one request
// probe the service: a failure opens it for another period, a
// success closes it.
func TestBreakerOpenTimeThenProbe(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		svc := &fakeService{}
		const openFor = 5 * time.Second
		b := newBreaker("tokens", svc, openFor, "", quiet)
		open(t, b, svc)
		time.Sleep(openFor)
		if called, err := through(t, b, svc); called || !errors.Is(err, errOpen) {
			t.Fatalf("at the end of the open time: called %v, %v; want errOpen without a call", called, err)
		}
		time.Sleep(time.Nanosecond)
		if called, err := through(t, b, svc); !called || err == nil || errors.Is(err, errOpen) {
			t.Fatalf("probe after the open time: called %v, %v; want the service's error", called, err)
		}
		if called, err := through(t, b, svc); called || !errors.Is(err, errOpen) {
			t.Fatalf("after a failed probe: called %v, %v; want open again", called, err)
		}
		time.Sleep(openFor + time.Nanosecond)
		svc.down.Store(false)
		for i := range 3 {
			if called, err := through(t, b, svc); !called || err != nil {
				t.Fatalf("request %d after a successful probe: called %v, %v; want it passed", i, called, err)
			}
		}
	})
}

// While the probe request is in flight the breaker lets no other through.
func TestBreakerOneProbeAtATime(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		svc := &fakeService{}
		b := newBreaker("tokens", svc, time.Second, "", quiet)
		open(t, b, svc)
		time.Sleep(time.Second + time.Nanosecond)
		svc.down.Store(false)
		svc.gate = make(chan struct{})
		release := sync.OnceFunc(func() { close(svc.gate) })
		defer release()
		probed, other := make(chan error, 1), make(chan error, 1)
		go func() {
			_, err := through(t, b, svc)
			probed <- err
		}()
		synctest.Wait() // the probe waits in the service
		go func() {
			_, err := through(t, b, svc)
			other <- err
		}()
		synctest.Wait()
		select {
		case err := <-other:
			if !errors.Is(err, errOpen) || svc.calls.Load() != breakerFailures+1 {
				t.Fatalf("during the probe: %v, %d calls besides it; want errOpen without a call", err, svc.calls.Load()-breakerFailures-1)
			}
		default:
			t.Fatal("a second request reached the service during the probe")
		}
		release()
		if err := <-probed; err != nil {
			t.Fatalf("probe: %v", err)
		}
		if called, err := through(t, b, svc); !called || err != nil {
			t.Fatalf("after the probe: called %v, %v; want closed", called, err)
		}
	})
}

// An open breaker asks the service's readiness every readyProbe and
// closes at the first 200, long before its open time; then it stops
// asking.
func TestBreakerClosesWhenServiceReady(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		svc := &fakeService{}
		b := newBreaker("tokens", svc, time.Hour, readyURL, quiet)
		open(t, b, svc)
		time.Sleep(readyProbe)
		synctest.Wait()
		if n := svc.probes.Load(); n != 1 {
			t.Fatalf("readiness asked %d times after %v; want once", n, readyProbe)
		}
		svc.down.Store(false) // up, not ready: 503
		time.Sleep(readyProbe)
		synctest.Wait()
		if called, err := through(t, b, svc); called || !errors.Is(err, errOpen) || svc.probes.Load() != 2 {
			t.Fatalf("service up but not ready: called %v, %v, asked %d times; want still open, asked twice", called, err, svc.probes.Load())
		}
		svc.ready.Store(true)
		time.Sleep(readyProbe - time.Nanosecond)
		synctest.Wait()
		if called, err := through(t, b, svc); called || !errors.Is(err, errOpen) {
			t.Fatalf("ready, before the next probe: called %v, %v; want still open", called, err)
		}
		time.Sleep(time.Nanosecond)
		synctest.Wait()
		if called, err := through(t, b, svc); !called || err != nil {
			t.Fatalf("after the probe found the service ready: called %v, %v; want closed", called, err)
		}
		asked := svc.probes.Load()
		time.Sleep(10 * readyProbe)
		if n := svc.probes.Load(); n != asked {
			t.Fatalf("readiness asked %d more times once closed; want none", n-asked)
		}
	})
}

// Only transport failures count: answers of any status are the service
// answering, and a client that went away is not the service's failure.
func TestBreakerCountsOnlyTransportFailures(t *testing.T) {
	t.Parallel()
	for name, svc := range map[string]*fakeService{
		"client gone": {fail: context.Canceled},
		"503":         {status: http.StatusServiceUnavailable},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			b := newBreaker("tokens", svc, time.Hour, "", quiet)
			if name == "client gone" {
				svc.down.Store(true)
			}
			for range 3 * breakerFailures {
				through(t, b, svc)
			}
			if called, err := through(t, b, svc); !called || errors.Is(err, errOpen) {
				t.Fatalf("after %d requests: called %v, %v; want the breaker closed", 3*breakerFailures, called, err)
			}
		})
	}
}
