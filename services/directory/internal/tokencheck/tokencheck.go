// Package tokencheck authenticates management API callers by their access
// tokens without depending on the tokens service for every call, and
// without trusting a revoked token for longer than one poll.
//
// A Checker follows the tokens service's revocation list (ListRevocations,
// polled every Interval) into memory and keeps its key set (GetKeySet).
// A JWT access token is verified here: signature against the key set,
// issuer, audience, lifetime, then the token id and the user's cut-off
// against the list. An opaque token is introspected by the tokens service
// and the answer kept until the token expires, checked against the list on
// every use. While the list is in sync, a revocation reaches the
// management API within one poll; while the tokens service is down (when
// nobody can revoke), what was checked keeps working for MaxStale after
// the last sync, and an opaque token never seen before is answered
// Unavailable.
package tokencheck

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"connectrpc.com/connect"
	"github.com/lestrrat-go/jwx/v3/jwk"
	"github.com/lestrrat-go/jwx/v3/jws"

	"google.golang.org/protobuf/types/known/timestamppb"

	tokensv1 "github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/tokens/v1"
)

// Tokens is what the checker needs of the tokens service's internal API.
type Tokens interface {
	Introspect(context.Context, *connect.Request[tokensv1.IntrospectRequest]) (*connect.Response[tokensv1.IntrospectResponse], error)
	ListRevocations(context.Context, *connect.Request[tokensv1.ListRevocationsRequest]) (*connect.Response[tokensv1.ListRevocationsResponse], error)
	GetKeySet(context.Context, *connect.Request[tokensv1.GetKeySetRequest]) (*connect.Response[tokensv1.GetKeySetResponse], error)
	CheckRevoked(context.Context, *connect.Request[tokensv1.CheckRevokedRequest]) (*connect.Response[tokensv1.CheckRevokedResponse], error)
}

// Errors Check returns.
var (
	// ErrInactive: the token is invalid, expired, revoked or not for the
	// audience.
	ErrInactive = errors.New("tokencheck: token inactive")
	// ErrUnavailable: the tokens service is needed and cannot answer.
	ErrUnavailable = errors.New("tokencheck: tokens service unavailable")
)

// Defaults.
const (
	DefaultInterval = time.Second
	DefaultMaxStale = 15 * time.Minute
	// keySetAge: the key set is read again this often (a new key is
	// published well before it signs) and when a token names an unknown
	// key, at most once per keyRetry.
	keySetAge  = time.Minute
	keyRetry   = 10 * time.Second
	maxEntries = 10000
	// askRetry: after CheckRevoked failed, the followed list answers alone
	// this long.
	askRetry = 5 * time.Second
)

// Checker checks management API tokens.
type Checker struct {
	Tokens   Tokens
	Issuer   string
	Audience string
	Interval time.Duration
	MaxStale time.Duration
	// StartGrace: see DefaultStartGrace (0 for it).
	StartGrace time.Duration
	Now        func() time.Time
	Logger     *slog.Logger

	mu      sync.Mutex
	started bool
	cursor  string
	synced  time.Time
	revoked map[string]time.Time // id → until (a user's: tokens expiring at or before it)
	down    bool
	// askFailed is when CheckRevoked last failed: the followed list then
	// answers without asking for a while (a hung tokens service would cost
	// every management call the internal call deadline).
	askFailed time.Time

	keyMu      sync.Mutex
	keys       jwk.Set
	keysRead   time.Time
	keysFailed time.Time

	cacheMu sync.Mutex
	cache   map[[32]byte]Token
}

// Token is what a valid token says.
type Token struct {
	ID      string
	Subject string
	// ClientID is the client the token was issued to (authz checks that
	// an admin client is one still).
	ClientID  string
	IssuedAt  time.Time
	ExpiresAt time.Time
}

func (c *Checker) now() time.Time {
	if c.Now != nil {
		return c.Now()
	}
	return time.Now()
}

func (c *Checker) interval() time.Duration {
	if c.Interval > 0 {
		return c.Interval
	}
	return DefaultInterval
}

func (c *Checker) maxStale() time.Duration {
	if c.MaxStale > 0 {
		return c.MaxStale
	}
	return DefaultMaxStale
}

// state is how far the revocation list can be trusted.
type state int

const (
	inSync  state = iota // a revocation is seen within a poll
	stale                // the tokens service is unreachable; trusted for MaxStale
	unknown              // never synced, or too long ago
)

func (c *Checker) state() state {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.started {
		return unknown
	}
	age := c.now().Sub(c.synced)
	switch {
	case age < 3*c.interval():
		return inSync
	case age < c.maxStale():
		return stale
	}
	return unknown
}

// Status describes the revocation list for /readyz: "in sync", "stale"
// (the tokens service is unreachable; checked tokens keep working) or
// "unknown" (every token is introspected).
func (c *Checker) Status() string {
	return [...]string{inSync: "in sync", stale: "stale", unknown: "unknown"}[c.state()]
}

// Check returns what raw says, ErrInactive, or ErrUnavailable.
func (c *Checker) Check(ctx context.Context, raw string) (Token, error) {
	now := c.now()
	st := c.state()
	key := sha256.Sum256([]byte(raw))
	c.cacheMu.Lock()
	t, cached := c.cache[key]
	c.cacheMu.Unlock()
	if cached && st != unknown {
		return c.current(ctx, t, now)
	}
	if strings.Count(raw, ".") == 2 && st != unknown {
		t, err := c.verifyJWT(ctx, raw, now)
		if err != nil {
			return Token{}, err
		}
		c.remember(key, t)
		return c.current(ctx, t, now)
	}
	// An opaque token, or the list cannot be trusted: ask the tokens
	// service, which checks everything.
	res, err := c.Tokens.Introspect(ctx, connect.NewRequest(&tokensv1.IntrospectRequest{Token: raw, Audience: c.Audience}))
	if err != nil {
		if cached && st == stale {
			return c.live(t, now)
		}
		return Token{}, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	m := res.Msg
	if !m.GetActive() || m.GetSubject() == "" || !slices.Contains(m.GetAudience(), c.Audience) {
		return Token{}, ErrInactive
	}
	t = Token{ID: m.GetTokenId(), Subject: m.GetSubject(), ClientID: m.GetClientId(), IssuedAt: m.GetIssuedAt().AsTime(), ExpiresAt: m.GetExpiresAt().AsTime()}
	if t.ID != "" && m.GetExpiresAt() != nil {
		c.remember(key, t)
	}
	return t, nil
}

// current is live, then the tokens service's own list: a revocation
// counts from the moment /revoke answered, not from the next poll. When
// the service cannot answer, the followed list decides (it is at most one
// poll behind, or stale only while nobody can revoke).
func (c *Checker) current(ctx context.Context, t Token, now time.Time) (Token, error) {
	t, err := c.live(t, now)
	if err != nil {
		return t, err
	}
	c.mu.Lock()
	skip := c.down || now.Sub(c.askFailed) < askRetry
	c.mu.Unlock()
	if skip {
		return t, nil
	}
	res, err := c.Tokens.CheckRevoked(ctx, connect.NewRequest(&tokensv1.CheckRevokedRequest{
		TokenId: t.ID, Subject: t.Subject, ExpiresAt: timestamppb.New(t.ExpiresAt)}))
	switch {
	case err == nil && res.Msg.GetRevoked():
		// Remembered as the followed list will have it: should the
		// service go down before the next poll, the list still says so.
		c.mu.Lock()
		if c.revoked == nil {
			c.revoked = map[string]time.Time{}
		}
		if t.ExpiresAt.After(c.revoked[t.ID]) {
			c.revoked[t.ID] = t.ExpiresAt
		}
		c.mu.Unlock()
		return Token{}, ErrInactive
	case err != nil:
		c.mu.Lock()
		c.askFailed = now
		c.mu.Unlock()
		c.logger().DebugContext(ctx, "revocation check at the tokens service failed; answering from the followed list", "err", err)
	}
	return t, nil
}

// live checks a token the checker has seen against time and the list.
func (c *Checker) live(t Token, now time.Time) (Token, error) {
	if !now.Before(t.ExpiresAt) {
		return Token{}, ErrInactive
	}
	c.mu.Lock()
	until, idRevoked := c.revoked[t.ID]
	userUntil, userCut := c.revoked["user:"+t.Subject]
	c.mu.Unlock()
	if (idRevoked && now.Before(until)) || (userCut && !t.ExpiresAt.After(userUntil)) {
		return Token{}, ErrInactive
	}
	return t, nil
}

func (c *Checker) remember(key [32]byte, t Token) {
	c.cacheMu.Lock()
	defer c.cacheMu.Unlock()
	if c.cache == nil || len(c.cache) >= maxEntries {
		c.cache = map[[32]byte]Token{} // bounded memory; a refill costs one check each
	}
	c.cache[key] = t
}

// claims of an access token, as the tokens service issues them.
type claims struct {
	Issuer    string   `json:"iss"`
	Subject   string   `json:"sub"`
	Audience  audience `json:"aud"`
	Expiry    int64    `json:"exp"`
	IssuedAt  int64    `json:"iat"`
	NotBefore int64    `json:"nbf"`
	JTI       string   `json:"jti"`
	ClientID  string   `json:"client_id"`
}

// audience accepts a string or an array (RFC 7519 §4.1.3).
type audience []string

func (a *audience) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		*a = audience{s}
		return nil
	}
	return json.Unmarshal(b, (*[]string)(a))
}

func (c *Checker) verifyJWT(ctx context.Context, raw string, now time.Time) (Token, error) {
	set, err := c.keySet(ctx, false)
	if err != nil {
		return Token{}, err
	}
	payload, err := jws.Verify([]byte(raw), jws.WithKeySet(set, jws.WithRequireKid(true)))
	if err != nil {
		// A key published since the set was read: read it again (rate
		// limited), then decide.
		if set, err = c.keySet(ctx, true); err != nil {
			return Token{}, err
		}
		if payload, err = jws.Verify([]byte(raw), jws.WithKeySet(set, jws.WithRequireKid(true))); err != nil {
			return Token{}, ErrInactive
		}
	}
	var cl claims
	// An access token has jti and client_id; an ID token (also signed by
	// the tokens service) has neither and must never pass as one.
	if json.Unmarshal(payload, &cl) != nil || cl.Issuer != c.Issuer || cl.JTI == "" || cl.ClientID == "" || cl.Subject == "" ||
		!slices.Contains(cl.Audience, c.Audience) {
		return Token{}, ErrInactive
	}
	t := Token{ID: cl.JTI, Subject: cl.Subject, ClientID: cl.ClientID, IssuedAt: time.Unix(cl.IssuedAt, 0), ExpiresAt: time.Unix(cl.Expiry, 0)}
	if !now.Before(t.ExpiresAt) || now.Before(time.Unix(cl.NotBefore, 0).Add(-time.Minute)) {
		return Token{}, ErrInactive
	}
	return t, nil
}

// keySet returns the tokens service's key set, read again when older than
// keySetAge or, with again, when the last read is older than keyRetry.
// Through an outage the last set read keeps serving.
func (c *Checker) keySet(ctx context.Context, again bool) (jwk.Set, error) {
	c.keyMu.Lock()
	defer c.keyMu.Unlock()
	now := c.now()
	fresh := c.keys != nil && now.Sub(c.keysRead) < keySetAge
	if fresh && (!again || now.Sub(c.keysRead) < keyRetry) {
		return c.keys, nil
	}
	if c.keys != nil && now.Sub(c.keysFailed) < keyRetry {
		return c.keys, nil
	}
	res, err := c.Tokens.GetKeySet(ctx, connect.NewRequest(&tokensv1.GetKeySetRequest{}))
	if err == nil {
		var set jwk.Set
		if set, err = jwk.Parse(res.Msg.GetJwks()); err == nil {
			c.keys, c.keysRead = set, now
			return set, nil
		}
	}
	c.keysFailed = now
	if c.keys != nil {
		return c.keys, nil
	}
	return nil, fmt.Errorf("%w: key set: %w", ErrUnavailable, err)
}

// Poll reads the revocation list to its head once.
func (c *Checker) Poll(ctx context.Context) error {
	for {
		c.mu.Lock()
		cursor := c.cursor
		c.mu.Unlock()
		res, err := c.Tokens.ListRevocations(ctx, connect.NewRequest(&tokensv1.ListRevocationsRequest{Cursor: cursor}))
		if err != nil {
			return err
		}
		m := res.Msg
		now := c.now()
		c.mu.Lock()
		if c.revoked == nil {
			c.revoked = map[string]time.Time{}
		}
		for _, r := range m.GetRevocations() {
			if until := r.GetExpiresAt().AsTime(); until.After(c.revoked[r.GetId()]) {
				c.revoked[r.GetId()] = until
			}
		}
		c.cursor = m.GetCursor()
		done := !m.GetMore() || m.GetCursor() == cursor
		if done {
			c.started, c.synced = true, now
		}
		c.mu.Unlock()
		if done {
			return nil
		}
	}
}

// sweep forgets expired revocations.
func (c *Checker) sweep() {
	now := c.now()
	c.mu.Lock()
	defer c.mu.Unlock()
	for id, until := range c.revoked {
		if !now.Before(until) {
			delete(c.revoked, id)
		}
	}
}

// DefaultStartGrace is how long Run stays quiet about an unreachable tokens
// service before it first synced: the services of one deployment start in
// any order (in the embedded process, directory before its own tokens).
const DefaultStartGrace = 10 * time.Second

// Run polls every Interval until ctx ends, logging an unreachable tokens
// service once per outage (at the start only once it has been unreachable
// for StartGrace).
func (c *Checker) Run(ctx context.Context) {
	t := time.NewTicker(c.interval())
	defer t.Stop()
	began, warned := time.Now(), false
	grace := c.StartGrace
	if grace == 0 {
		grace = DefaultStartGrace
	}
	for n := 0; ; n++ {
		err := c.Poll(ctx)
		c.mu.Lock()
		c.down = err != nil
		synced := c.started
		c.mu.Unlock()
		switch {
		case err != nil && !warned && ctx.Err() == nil && (synced || time.Since(began) >= grace):
			c.logger().WarnContext(ctx, "revocation list unreachable; checked management tokens keep working for a bounded time",
				"max_stale", c.maxStale().String(), "err", err)
			warned = true
		case err == nil && warned:
			c.logger().InfoContext(ctx, "revocation list in sync again")
			warned = false
		}
		if n%60 == 0 {
			c.sweep()
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (c *Checker) logger() *slog.Logger {
	if c.Logger != nil {
		return c.Logger
	}
	return slog.Default()
}
