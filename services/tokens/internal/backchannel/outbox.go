package backchannel

import (
	"cmp"
	"context"
	"errors"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	directoryv1 "github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/directory/v1"
	"github.com/gatehouse-id/gatehouse/pkg/netguard"
	"github.com/gatehouse-id/gatehouse/pkg/telemetry"
	"github.com/gatehouse-id/gatehouse/services/tokens/internal/clients"
	"github.com/gatehouse-id/gatehouse/services/tokens/internal/store"
)

// Delivery's pace.
const (
	// Timeout bounds one POST, connection included.
	Timeout = 5 * time.Second
	// Lease is how long a claimed try keeps a logout from other senders:
	// longer than a try can take (tryTimeout), so only a sender that died
	// lets it run out.
	Lease = time.Minute
	// MaxBackoff caps the wait between two tries.
	MaxBackoff = time.Hour
	// GiveUp is how long after the logout a failing delivery is retried.
	GiveUp = 24 * time.Hour
	// DefaultSweep is how often the outbox is read when nothing kicks it:
	// logouts queued by other replicas, leases run out.
	DefaultSweep = 30 * time.Second

	// tryTimeout bounds a try: the directory lookup and the POST.
	tryTimeout = 20 * time.Second
	// batch bounds the logouts read at once; parallel those sent at once,
	// so one slow receiver does not hold up the others.
	batch    = 50
	parallel = 8
)

// Store is the outbox (store.Store).
type Store interface {
	DueLogouts(ctx context.Context, now time.Time, limit int) ([]store.Logout, time.Time, error)
	ClaimLogout(ctx context.Context, l *store.Logout, now, until time.Time) (bool, error)
	RetryLogout(ctx context.Context, l store.Logout, at time.Time) (bool, error)
	DeleteLogout(ctx context.Context, l store.Logout) error
}

var _ Store = (*store.Store)(nil)

// Clients reads a client's registration from the directory, bypassing
// any cache (clients.Cache.Refresh): clients.ErrUnknown for a client that
// no longer exists.
type Clients interface {
	Refresh(ctx context.Context, clientID string) (*directoryv1.Client, error)
}

// Outbox delivers the queued logout tokens. Every field but Sweep is
// required.
type Outbox struct {
	Issuer  string
	Store   Store
	Clients Clients
	Signer  Signer
	// HTTP posts the logout tokens: NewHTTPClient's.
	HTTP *http.Client
	// Sweep is how often the outbox is read without a kick (0: DefaultSweep).
	Sweep  time.Duration
	Now    func() time.Time
	Logger *slog.Logger

	once sync.Once
	kick chan struct{}
}

var logouts = telemetry.MustCounter("gatehouse.tokens.backchannel_logouts",
	"Back-channel logout tries by result: delivered (a 2xx answer), retry, given_up (still failing a day after the logout) "+
		"and dropped (the client was removed or has no back-channel URI any more).", "result")

// NewHTTPClient is the client logout tokens are posted with: p's address
// policy checked at every dial (the identity providers' policy, the
// GATEHOUSE_IDP_* settings), Timeout per POST, and no redirect followed,
// so the registered URI is the only one ever called (a 3xx answer is a
// failed try).
func NewHTTPClient(p netguard.Policy) *http.Client {
	c := p.Client(netguard.Options{Timeout: Timeout, MaxBody: 64 << 10})
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return c
}

func (o *Outbox) kicks() chan struct{} {
	o.once.Do(func() { o.kick = make(chan struct{}, 1) })
	return o.kick
}

// Kick asks Run for a round now: logouts were just queued. It never blocks.
func (o *Outbox) Kick() {
	select {
	case o.kicks() <- struct{}{}:
	default:
	}
}

// Run delivers what is due at once, when kicked, when the next queued
// logout falls due, and every Sweep, until ctx ends.
func (o *Outbox) Run(ctx context.Context) {
	kick := o.kicks()
	t := time.NewTimer(0)
	defer t.Stop()
	failing := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-kick:
		}
		next, err := o.Deliver(ctx)
		switch {
		case err != nil && ctx.Err() == nil && !failing:
			o.Logger.WarnContext(ctx, "back-channel logouts: the outbox cannot be read; retrying", "err", err)
			failing = true
		case err == nil && failing:
			o.Logger.InfoContext(ctx, "back-channel logouts: the outbox is readable again")
			failing = false
		}
		wait := o.Sweep
		if wait <= 0 {
			wait = DefaultSweep
		}
		if !next.IsZero() {
			wait = max(min(wait, next.Sub(o.Now())), 0)
		}
		t.Reset(wait)
	}
}

// Deliver tries every logout due now and returns when the next one falls
// due (zero when none is queued). It stops at the first storage error.
func (o *Outbox) Deliver(ctx context.Context) (time.Time, error) {
	for {
		due, next, err := o.Store.DueLogouts(ctx, o.Now(), batch)
		if err != nil || len(due) == 0 {
			return next, err
		}
		if err := o.tryAll(ctx, due); err != nil {
			return time.Time{}, err
		}
	}
}

// tryAll tries due, parallel at a time, and returns the first storage
// error.
func (o *Outbox) tryAll(ctx context.Context, due []store.Logout) error {
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
		slots = make(chan struct{}, parallel)
	)
	for _, l := range due {
		slots <- struct{}{}
		wg.Go(func() {
			defer func() { <-slots }()
			if err := o.try(ctx, l); err != nil {
				mu.Lock()
				first = cmp.Or(first, err)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if first == nil {
		return ctx.Err()
	}
	return first
}

// try claims l and, when this sender got it, sends it and records the
// outcome.
func (o *Outbox) try(ctx context.Context, l store.Logout) error {
	now := o.Now()
	ok, err := o.Store.ClaimLogout(ctx, &l, now, now.Add(Lease))
	if err != nil || !ok {
		return err // !ok: another sender's
	}
	tctx, cancel := context.WithTimeout(ctx, tryTimeout)
	r := o.send(tctx, l)
	cancel()
	// A try cut short by shutdown is recorded all the same, so the next
	// start retries it after its backoff, not after the lease.
	return o.record(context.WithoutCancel(ctx), l, r)
}

// outcome is what one try came to.
type outcome struct {
	status int    // the receiver's answer; 0 without one
	drop   string // why the logout is dropped unsent; "" to send it
	fail   string // why the try failed; "" when it did not
}

// send reads the client's registration now and posts the logout token to
// its back-channel URI.
func (o *Outbox) send(ctx context.Context, l store.Logout) outcome {
	c, err := o.Clients.Refresh(ctx, l.ClientID)
	if errors.Is(err, clients.ErrUnknown) {
		return outcome{drop: "client removed"}
	}
	if err != nil {
		return outcome{fail: "directory unavailable"}
	}
	uri := c.GetBackChannelLogoutUri()
	if uri == "" || c.GetKind() != directoryv1.ClientKind_CLIENT_KIND_OIDC_APP {
		return outcome{drop: "no back-channel logout URI registered"}
	}
	tok, err := sign(o.Signer, o.Issuer, l, o.Now())
	if err != nil {
		o.Logger.ErrorContext(ctx, "back-channel logout: no logout token", "client_id", l.ClientID, "err", err)
		return outcome{fail: "signing failed"}
	}
	body := url.Values{"logout_token": {tok}}.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, uri, strings.NewReader(body))
	if err != nil {
		return outcome{drop: "unusable back-channel logout URI"} // the directory checks them; never retried
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	res, err := o.HTTP.Do(req)
	if err != nil {
		return outcome{fail: reason(err)}
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(res.Body, 4<<10)) // lets the connection be reused
	_ = res.Body.Close()
	if res.StatusCode < 200 || res.StatusCode > 299 {
		return outcome{status: res.StatusCode, fail: "not a 2xx answer"}
	}
	return outcome{status: res.StatusCode}
}

// reason names a failed POST without its error's text, which quotes the
// URI (and whatever its query holds).
func reason(err error) string {
	var ne net.Error
	switch {
	case errors.Is(err, netguard.ErrForbidden):
		return "address not allowed (netguard)"
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return "timeout"
	default:
		return "connection failed"
	}
}

// record deletes l, delivered, dropped or given up, or makes it due again
// after a backoff.
func (o *Outbox) record(ctx context.Context, l store.Logout, r outcome) error {
	log := o.Logger.With("client_id", l.ClientID, "attempts", l.Attempts)
	switch {
	case r.drop == "" && r.fail == "":
		logouts.Inc(ctx, "delivered")
		log.InfoContext(ctx, "back-channel logout delivered", "status", r.status)
	case r.drop != "":
		logouts.Inc(ctx, "dropped")
		log.InfoContext(ctx, "back-channel logout dropped", "reason", r.drop)
	case o.Now().Sub(l.CreatedAt) >= GiveUp:
		logouts.Inc(ctx, "given_up")
		log.WarnContext(ctx, "back-channel logout given up", "status", r.status, "reason", r.fail)
	default:
		wait := Backoff(l.Attempts)
		logouts.Inc(ctx, "retry")
		log.WarnContext(ctx, "back-channel logout not delivered; retrying", "status", r.status, "reason", r.fail,
			"retry_in", wait.String())
		// false: this try outlived its lease and another sender has the
		// logout now; its outcome counts.
		_, err := o.Store.RetryLogout(ctx, l, o.Now().Add(wait))
		return err
	}
	return o.Store.DeleteLogout(ctx, l)
}

// Backoff is the wait after the nth failed try: 1 s doubling up to
// MaxBackoff, with jitter over its upper half so that the logouts of one
// outage are not all retried in step.
func Backoff(n int) time.Duration {
	d := time.Second
	for i := 1; i < n && d < MaxBackoff; i++ {
		d *= 2
	}
	d = min(d, MaxBackoff)
	return d/2 + rand.N(d/2+1) // #nosec G404 -- jitter, not a secret
}
