package accesstoken

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/lestrrat-go/jwx/v3/jwk"
	"github.com/lestrrat-go/jwx/v3/jws"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/gatehouse-id/gatehouse/pkg/feed"
	tokensv1 "github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/tokens/v1"
)

// TokenAPI is what a resource server needs of the tokens service's
// internal API.
type TokenAPI interface {
	Introspect(context.Context, *tokensv1.IntrospectRequest) (*tokensv1.IntrospectResponse, error)
	ListRevocations(context.Context, *tokensv1.ListRevocationsRequest) (*tokensv1.ListRevocationsResponse, error)
	GetKeySet(context.Context, *tokensv1.GetKeySetRequest) (*tokensv1.GetKeySetResponse, error)
	CheckRevoked(context.Context, *tokensv1.CheckRevokedRequest) (*tokensv1.CheckRevokedResponse, error)
}

// RemoteOptions configure NewRemote.
type RemoteOptions struct {
	// Issuer is the tokens service's issuer; Audience the resource's.
	Issuer, Audience string
	// Interval and MaxStale of the revocation list's follower (see
	// feed.Follower); zero for the defaults.
	Interval, MaxStale, StartGrace time.Duration
	Now                            func() time.Time
	Logger                         *slog.Logger
}

// Remote verifies access tokens away from the tokens service, without
// asking it for every call and without trusting a revoked token for longer
// than one poll: JWTs against the key set it publishes (read again when a
// token names a key not seen yet), opaque tokens by its introspection
// (remembered until they expire), and every token against its revocation
// list, followed into memory and asked at once on each use. While the
// tokens service is down (when nobody can revoke), what was checked keeps
// working for MaxStale after the last sync; an opaque token never seen
// before is then unavailable.
type Remote struct {
	*Verifier
	revocations *remoteRevocations
}

// NewRemote returns a Remote reading api; Run follows the revocation list.
func NewRemote(api TokenAPI, o RemoteOptions) *Remote {
	now := o.Now
	if now == nil {
		now = time.Now
	}
	logger := o.Logger
	if logger == nil {
		logger = slog.Default()
	}
	rv := &remoteRevocations{api: api, now: now, logger: logger}
	rv.follower = &feed.Follower{Name: "revocation list", Read: rv.read, Interval: o.Interval, MaxStale: o.MaxStale,
		StartGrace: o.StartGrace, Serving: "checked access tokens keep working", Now: now, Logger: logger}
	return &Remote{
		Verifier: &Verifier{Issuer: o.Issuer, Audience: o.Audience, Now: o.Now, // nil: its cache expires on otter's own clock, with clean-ups
			Keys:   &remoteKeys{api: api, now: now},
			Opaque: remoteOpaque{api: api, audience: o.Audience}, Revoked: rv},
		revocations: rv,
	}
}

// Run follows the revocation list until ctx ends.
func (r *Remote) Run(ctx context.Context) {
	n := 0
	r.revocations.follower.Run(ctx, func() {
		if n++; n%60 == 0 {
			r.revocations.sweep()
		}
	})
}

// Poll reads the revocation list to its head once.
func (r *Remote) Poll(ctx context.Context) error { return r.revocations.follower.Poll(ctx) }

// Status describes the revocation list for /readyz: "in sync", "stale"
// (the tokens service is unreachable; checked tokens keep working) or
// "unknown" (each use asks the tokens service).
func (r *Remote) Status() string { return r.revocations.follower.State().String() }

// remoteOpaque introspects opaque tokens at the tokens service.
type remoteOpaque struct {
	api      TokenAPI
	audience string
}

func (o remoteOpaque) Lookup(ctx context.Context, raw string) (*Token, error) {
	res, err := o.api.Introspect(ctx, &tokensv1.IntrospectRequest{Token: raw, Audience: o.audience})
	if err != nil {
		return nil, fmt.Errorf("%w: introspection: %w", ErrUnavailable, err)
	}
	m := res
	if !m.GetActive() || m.GetSubject() == "" || m.GetExpiresAt() == nil {
		return nil, ErrInactive
	}
	return &Token{ID: m.GetTokenId(), Subject: m.GetSubject(), ClientID: m.GetClientId(), OrgID: m.GetOrgId(),
		Scopes: m.GetScopes(), Audience: m.GetAudience(), IssuedAt: m.GetIssuedAt().AsTime(),
		NotBefore: m.GetIssuedAt().AsTime(), ExpiresAt: m.GetExpiresAt().AsTime(), JKT: m.GetJkt()}, nil
}

// Key set reads.
const (
	// keySetAge: the key set is read again this often (a new key is
	// published well before it signs) and when a token names an unknown
	// key, at most once per keyRetry.
	keySetAge = time.Minute
	keyRetry  = 10 * time.Second
)

// remoteKeys verifies signatures against the tokens service's key set.
type remoteKeys struct {
	api TokenAPI
	now func() time.Time

	mu     sync.Mutex
	set    jwk.Set
	read   time.Time
	failed time.Time
}

func (k *remoteKeys) Verify(ctx context.Context, token string) ([]byte, error) {
	set, err := k.keySet(ctx, false)
	if err != nil {
		return nil, err
	}
	payload, err := jws.Verify([]byte(token), jws.WithKeySet(set, jws.WithRequireKid(true)))
	if err == nil {
		return payload, nil
	}
	// A key published since the set was read: read it again (rate
	// limited), then decide.
	if set, err = k.keySet(ctx, true); err != nil {
		return nil, err
	}
	return jws.Verify([]byte(token), jws.WithKeySet(set, jws.WithRequireKid(true)))
}

// keySet returns the key set, read again when older than keySetAge or,
// with again, when the last read is older than keyRetry. Through an outage
// the last set read keeps serving.
func (k *remoteKeys) keySet(ctx context.Context, again bool) (jwk.Set, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	now := k.now()
	fresh := k.set != nil && now.Sub(k.read) < keySetAge
	if fresh && (!again || now.Sub(k.read) < keyRetry) {
		return k.set, nil
	}
	if k.set != nil && now.Sub(k.failed) < keyRetry {
		return k.set, nil
	}
	res, err := k.api.GetKeySet(ctx, &tokensv1.GetKeySetRequest{})
	if err == nil {
		var set jwk.Set
		if set, err = jwk.Parse(res.GetJwks()); err == nil {
			k.set, k.read = set, now
			return set, nil
		}
	}
	k.failed = now
	if k.set != nil {
		return k.set, nil
	}
	return nil, fmt.Errorf("%w: key set: %w", ErrUnavailable, err)
}

// askRetry: after CheckRevoked failed, the followed list answers alone this
// long (a hung tokens service would cost every call the internal call
// deadline).
const askRetry = 5 * time.Second

// remoteRevocations follows the tokens service's revocation list and asks
// it on each use: a revocation counts from the moment /revoke answered,
// not from the next poll. When the service cannot answer, the followed
// list decides (at most one poll behind, or stale only while nobody can
// revoke); while it has never been read, or not for MaxStale, the service
// must answer.
type remoteRevocations struct {
	api      TokenAPI
	now      func() time.Time
	logger   *slog.Logger
	follower *feed.Follower

	mu        sync.Mutex
	cursor    string
	revoked   map[string]time.Time // id, or "user:"+subject → until (a user's: tokens expiring at or before it)
	askFailed time.Time
}

func (r *remoteRevocations) TokenRevoked(ctx context.Context, id, subject string, expiresAt time.Time) (bool, error) {
	now := r.now()
	r.mu.Lock()
	until, idRevoked := r.revoked[id]
	userUntil, userCut := r.revoked["user:"+subject]
	recentFailure := now.Sub(r.askFailed) < askRetry
	r.mu.Unlock()
	if (idRevoked && now.Before(until)) || (userCut && !expiresAt.After(userUntil)) {
		return true, nil
	}
	state := r.follower.State()
	if state != feed.Unknown && (r.follower.Down() || recentFailure) {
		return false, nil
	}
	res, err := r.api.CheckRevoked(ctx, &tokensv1.CheckRevokedRequest{
		TokenId: id, Subject: subject, ExpiresAt: timestamppb.New(expiresAt)})
	switch {
	case err != nil && state == feed.Unknown:
		return false, fmt.Errorf("%w: %w", ErrUnavailable, err)
	case err != nil:
		r.mu.Lock()
		r.askFailed = now
		r.mu.Unlock()
		r.logger.DebugContext(ctx, "revocation check at the tokens service failed; answering from the followed list", "err", err)
		return false, nil
	case res.GetRevoked():
		// Remembered as the followed list will have it: should the
		// service go down before the next poll, the list still says so.
		r.remember(id, expiresAt)
		return true, nil
	}
	return false, nil
}

func (r *remoteRevocations) remember(id string, until time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.revoked == nil {
		r.revoked = map[string]time.Time{}
	}
	if until.After(r.revoked[id]) {
		r.revoked[id] = until
	}
}

// read reads the revocation list to its head once.
func (r *remoteRevocations) read(ctx context.Context) error {
	for {
		r.mu.Lock()
		cursor := r.cursor
		r.mu.Unlock()
		res, err := r.api.ListRevocations(ctx, &tokensv1.ListRevocationsRequest{Cursor: cursor})
		if err != nil {
			return err
		}
		m := res
		for _, rv := range m.GetRevocations() {
			r.remember(rv.GetId(), rv.GetExpiresAt().AsTime())
		}
		r.mu.Lock()
		r.cursor = m.GetCursor()
		r.mu.Unlock()
		if !m.GetMore() || m.GetCursor() == cursor {
			return nil
		}
	}
}

// sweep forgets expired revocations.
func (r *remoteRevocations) sweep() {
	now := r.now()
	r.mu.Lock()
	defer r.mu.Unlock()
	for id, until := range r.revoked {
		if !now.Before(until) {
			delete(r.revoked, id)
		}
	}
}
