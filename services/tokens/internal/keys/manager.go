package keys

import (
	"context"
	"crypto"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lestrrat-go/jwx/v3/jwk"

	"github.com/gatehouse-id/gatehouse/pkg/db"
	"github.com/gatehouse-id/gatehouse/pkg/rpc"
	"github.com/gatehouse-id/gatehouse/pkg/secrets"
)

// Defaults of Options.
const (
	DefaultPrePublish     = 2 * time.Minute
	DefaultReloadInterval = 10 * time.Second
	DefaultKeySetMaxAge   = 60 * time.Second
	DefaultExpirySkew     = 5 * time.Minute
)

// Errors of the signing path.
var (
	// ErrStale: the keys could not be reloaded for PrePublish, so another
	// replica may already have retired the key this one would use. The
	// token endpoint should answer 503 and retry later.
	ErrStale = errors.New("signing keys not reloaded recently enough to sign safely")
	// ErrNoSigningKey: no loaded key has reached its sign_from (only
	// possible if the table was changed by hand).
	ErrNoSigningKey = errors.New("no signing key is active")
	// ErrConcurrentRotation: another rotation created the next key at the
	// same moment; the caller may retry.
	ErrConcurrentRotation = errors.New("another key rotation happened concurrently; retry")
)

// Options configure a Manager. Algorithm, RotationInterval,
// MaxTokenLifetime and MasterKey come from the service's configuration;
// the rest have defaults.
type Options struct {
	// Algorithm of the first key and of automatic rotations: RS256 (the
	// default when empty), ES256 or EdDSA. A change takes effect at the next
	// rotation; Rotate switches at once.
	Algorithm string
	// RotationInterval is how long each key signs (cfg.Tokens.KeyRotationInterval).
	RotationInterval time.Duration
	// MaxTokenLifetime is the longest lifetime of any token signed with
	// these keys (max of access and ID token lifetimes): a retired key stays
	// published that long.
	MaxTokenLifetime time.Duration
	// MasterKey encrypts private keys at rest (32 bytes).
	MasterKey []byte
	// Library signs RS256 and ES256: LibraryAuto (the default when empty)
	// uses OpenSSL where libcrypto.so.3 loads and the standard library
	// otherwise; LibraryOpenSSL fails New without OpenSSL; LibraryGo never
	// loads it. EdDSA always signs with the standard library.
	Library string

	// PrePublish is how long a key is published before it signs; it must
	// exceed KeySetMaxAge + ReloadInterval + rpc.EdgeCacheMaxAge.
	PrePublish time.Duration
	// ReloadInterval is how often Start's loop reloads the table.
	ReloadInterval time.Duration
	// KeySetMaxAge is the Cache-Control max-age of the key set.
	KeySetMaxAge time.Duration
	// ExpirySkew keeps a retired key published a little longer than its
	// tokens live, for clock differences between replicas and relying
	// parties' expiry leeway.
	ExpirySkew time.Duration

	Logger *slog.Logger
	Now    func() time.Time
}

func (o *Options) setDefaults() error {
	if o.Algorithm == "" {
		o.Algorithm = RS256
	}
	if o.PrePublish == 0 {
		o.PrePublish = DefaultPrePublish
	}
	if o.ReloadInterval == 0 {
		o.ReloadInterval = DefaultReloadInterval
	}
	if o.KeySetMaxAge == 0 {
		o.KeySetMaxAge = DefaultKeySetMaxAge
	}
	if o.ExpirySkew == 0 {
		o.ExpirySkew = DefaultExpirySkew
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Library == "" {
		o.Library = LibraryAuto
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	var problems []error
	if err := CheckAlgorithm(o.Algorithm); err != nil {
		problems = append(problems, err)
	}
	if err := CheckLibrary(o.Library); err != nil {
		problems = append(problems, err)
	}
	if o.MaxTokenLifetime <= 0 {
		problems = append(problems, errors.New("MaxTokenLifetime must be positive"))
	}
	if o.ReloadInterval < 0 || o.KeySetMaxAge < 0 || o.ExpirySkew < 0 {
		problems = append(problems, errors.New("durations must not be negative"))
	}
	if o.PrePublish <= o.KeySetMaxAge+o.ReloadInterval+rpc.EdgeCacheMaxAge {
		problems = append(problems, fmt.Errorf("PrePublish %s must exceed KeySetMaxAge %s + ReloadInterval %s + edge's cache %s",
			o.PrePublish, o.KeySetMaxAge, o.ReloadInterval, rpc.EdgeCacheMaxAge))
	}
	if o.RotationInterval <= o.PrePublish {
		problems = append(problems, fmt.Errorf("RotationInterval %s must exceed PrePublish %s", o.RotationInterval, o.PrePublish))
	}
	if err := errors.Join(problems...); err != nil {
		return fmt.Errorf("keys: invalid options: %w", err)
	}
	return nil
}

// Key is a published key, for verification and for the key set.
type Key struct {
	ID         string
	Algorithm  string
	Generation int64
	CreatedAt  time.Time
	SignFrom   time.Time
	// RetireAt and ExpiresAt are zero until a successor is scheduled.
	RetireAt  time.Time
	ExpiresAt time.Time
	Public    crypto.PublicKey
	// JWK is the public JWK (kid, use "sig", alg). It is shared: do not
	// modify it.
	JWK jwk.Key
}

// PublicKeySet is an immutable snapshot of the published keys.
type PublicKeySet struct {
	// Version changes whenever the set of keys changes, so consumers can
	// cache what they derive from it.
	Version uint64
	// Keys, newest first. Shared: do not modify.
	Keys []*Key
}

// Manager holds the signing keys: it loads them, rotates them and serves
// the hot paths (Signer, Sign, Verify, PublicKeys, KeyByID) from an
// in-memory snapshot. It is safe for concurrent use.
type Manager struct {
	db     *db.DB
	cipher *secrets.Cipher
	o      Options
	ossl   string // OpenSSL's version when it signs RS256 and ES256 (see Options.Library)

	mu     sync.Mutex            // serialises Reload and Rotate (the snapshot's writers)
	parsed map[string]*parsedKey // by kid; guarded by mu
	snap   atomic.Pointer[snapshot]

	loopMu sync.Mutex
	cancel context.CancelFunc
	done   chan struct{}
}

// parsedKey caches what is expensive to build per key: decryption and
// parsing happen once per process.
type parsedKey struct {
	jwk    jwk.Key
	pub    crypto.PublicKey
	signer *Signer // nil once the key may no longer sign
}

type snapshot struct {
	loadedAt time.Time
	signers  []*Signer // keys that may sign, newest sign_from first
	byID     map[string]*Key
	public   PublicKeySet
}

// New loads the keys from store, creating the first one on an empty table
// (it signs at once, see the package doc) or the next one if a rotation is
// due. Call Start to keep them current.
func New(ctx context.Context, store *db.DB, o Options) (*Manager, error) {
	if err := o.setDefaults(); err != nil {
		return nil, err
	}
	c, err := secrets.NewCipher(o.MasterKey, secrets.PurposeSigningKeys)
	if err != nil {
		return nil, fmt.Errorf("keys: %w", err)
	}
	m := &Manager{db: store, cipher: c, o: o, parsed: map[string]*parsedKey{}}
	if m.ossl, err = useOpenSSL(o.Library, o.Logger); err != nil {
		return nil, fmt.Errorf("keys: %w", err)
	}
	m.snap.Store(&snapshot{byID: map[string]*Key{}})
	if err := m.Reload(ctx); err != nil {
		return nil, err
	}
	return m, nil
}

// KeySetMaxAge is the longest a key set may be cached (Cache-Control
// max-age); PrePublish was checked against it.
func (m *Manager) KeySetMaxAge() time.Duration { return m.o.KeySetMaxAge }

// DefaultAlgorithm is the algorithm of automatic rotations.
func (m *Manager) DefaultAlgorithm() string { return m.o.Algorithm }

// Signer returns the key to sign with now: the newest loaded key whose
// sign_from has passed. ErrStale when the keys were last loaded more than
// PrePublish ago. The result is cached; keep it only for one token.
func (m *Manager) Signer() (*Signer, error) {
	s := m.snap.Load()
	now := m.o.Now()
	if now.Sub(s.loadedAt) >= m.o.PrePublish {
		return nil, ErrStale
	}
	for _, sg := range s.signers {
		if !now.Before(sg.SignFrom) {
			return sg, nil
		}
	}
	return nil, ErrNoSigningKey
}

// Ready reports, for the readiness probe, whether this replica can sign:
// nil, ErrStale or ErrNoSigningKey.
func (m *Manager) Ready(context.Context) error {
	_, err := m.Signer()
	return err
}

// Sign signs claims (a JSON object) with the current key; see Signer.Sign.
func (m *Manager) Sign(claims []byte) (string, error) {
	s, err := m.Signer()
	if err != nil {
		return "", err
	}
	return s.Sign(claims)
}

// SignAccessToken signs an access token's claims with the current key
// (typ at+jwt); see Signer.SignAccessToken.
func (m *Manager) SignAccessToken(claims []byte) (string, error) {
	s, err := m.Signer()
	if err != nil {
		return "", err
	}
	return s.SignAccessToken(claims)
}

// PublicKeys returns the published keys.
func (m *Manager) PublicKeys() PublicKeySet { return m.snap.Load().public }

// KeyByID returns the published key kid, for verifying our own tokens.
func (m *Manager) KeyByID(kid string) (*Key, bool) {
	k, ok := m.snap.Load().byID[kid]
	return k, ok
}

// PublicKey returns the public key of the published key kid (for
// verifiers that only need the key: *rsa.PublicKey, *ecdsa.PublicKey or
// ed25519.PublicKey, matching the key's Algorithm).
func (m *Manager) PublicKey(kid string) (crypto.PublicKey, bool) {
	k, ok := m.snap.Load().byID[kid]
	if !ok {
		return nil, false
	}
	return k.Public, true
}

// Reload reads the table, creates the first or the next key when one is
// due (RotationInterval - PrePublish after the newest key's sign_from, so
// it signs exactly when the newest has signed for RotationInterval), and
// deletes keys that have left the key set. Start calls it every
// ReloadInterval. On error the previous snapshot stays in use.
func (m *Manager) Reload(ctx context.Context) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	latest, err := m.load(ctx)
	if err != nil {
		return err
	}
	if latest != nil && !m.rotationDue(latest.SignFrom, m.o.Now()) {
		return nil
	}
	if _, err := m.create(ctx, m.o.Algorithm, false); err != nil {
		switch {
		case errors.Is(err, errNotDue):
		case errors.Is(err, db.ErrConflict):
			m.o.Logger.DebugContext(ctx, "signing keys: another replica rotated first; reloading")
		default:
			return err
		}
	}
	_, err = m.load(ctx)
	return err
}

func (m *Manager) rotationDue(newestSignFrom, now time.Time) bool {
	return !now.Before(newestSignFrom.Add(m.o.RotationInterval - m.o.PrePublish))
}

// load builds a new snapshot from the table and returns the newest key
// (nil on an empty table). The caller holds mu.
func (m *Manager) load(ctx context.Context) (*Key, error) {
	now := m.o.Now() // before the read: the snapshot is no newer than this
	rows, err := selectRows(ctx, m.db)
	if err != nil {
		return nil, fmt.Errorf("keys: %w", err)
	}
	prev := m.snap.Load()
	next := &snapshot{loadedAt: now, byID: make(map[string]*Key, len(rows))}
	parsed := make(map[string]*parsedKey, len(rows))
	var newest *Key
	expired := false
	for i := range rows {
		r := &rows[i]
		if r.ExpiresAt != nil && !now.Before(*r.ExpiresAt) {
			expired = true
			continue
		}
		maySign := r.RetireAt == nil || now.Before(*r.RetireAt)
		p, err := m.parse(r, m.parsed[r.ID], maySign)
		if err != nil {
			return nil, fmt.Errorf("keys: signing key %s: %w", r.ID, err)
		}
		parsed[r.ID] = p
		k := &Key{ID: r.ID, Algorithm: r.Algorithm, Generation: r.Generation, CreatedAt: r.CreatedAt,
			SignFrom: r.SignFrom, Public: p.pub, JWK: p.jwk}
		if r.RetireAt != nil {
			k.RetireAt = *r.RetireAt
		}
		if r.ExpiresAt != nil {
			k.ExpiresAt = *r.ExpiresAt
		}
		if newest == nil {
			newest = k
		}
		next.byID[k.ID] = k
		next.public.Keys = append(next.public.Keys, k)
		if p.signer != nil {
			next.signers = append(next.signers, p.signer)
		}
	}
	// Generations grow with sign_from (create keeps it so); sort anyway so
	// Signer's first match is always the newest.
	slices.SortStableFunc(next.signers, func(a, b *Signer) int { return b.SignFrom.Compare(a.SignFrom) })
	next.public.Version = prev.public.Version
	if !sameKeys(prev.public.Keys, next.public.Keys) {
		next.public.Version++
	}
	m.parsed = parsed
	m.snap.Store(next)
	if expired {
		n, err := deleteExpired(ctx, m.db, now)
		if err != nil {
			m.o.Logger.WarnContext(ctx, "signing keys: could not delete expired keys", "err", err)
		} else if n > 0 {
			m.o.Logger.InfoContext(ctx, "signing keys: deleted keys that left the key set", "count", n)
		}
	}
	return newest, nil
}

// parse reuses what an earlier load parsed, decrypting the private key
// only for a key that may still sign, and dropping it once it may not.
func (m *Manager) parse(r *row, cached *parsedKey, maySign bool) (*parsedKey, error) {
	if cached != nil {
		switch {
		case cached.signer == nil && !maySign, cached.signer != nil && maySign:
			return cached, nil
		case !maySign:
			return &parsedKey{jwk: cached.jwk, pub: cached.pub}, nil // forget the private key
		}
	}
	p := cached
	if p == nil {
		j, pub, err := parsePublicJWK(r.ID, r.Algorithm, []byte(r.PublicJWK))
		if err != nil {
			return nil, err
		}
		p = &parsedKey{jwk: j, pub: pub}
	}
	if !maySign {
		return p, nil
	}
	der, err := m.cipher.Decrypt(r.PrivateKey, []byte(r.ID))
	if err != nil {
		return nil, fmt.Errorf("decrypt private key (is the master key the one it was created with?): %w", err)
	}
	priv, err := parsePrivate(r.Algorithm, der)
	clear(der)
	if err != nil {
		return nil, err
	}
	if pe, ok := priv.Public().(interface{ Equal(crypto.PublicKey) bool }); !ok || !pe.Equal(p.pub) {
		return nil, errors.New("private key does not match the stored public JWK")
	}
	s, err := m.newSigner(r.ID, r.Algorithm, priv, r.SignFrom)
	if err != nil {
		return nil, err
	}
	return &parsedKey{jwk: p.jwk, pub: p.pub, signer: s}, nil
}

func sameKeys(a, b []*Key) bool {
	return slices.EqualFunc(a, b, func(x, y *Key) bool { return x.ID == y.ID })
}

// Start runs the reload loop (every ReloadInterval) until ctx ends or Stop
// is called. Reload errors are logged; the keys loaded before stay in use
// until they are stale (see Signer). Calling Start again is a no-op.
func (m *Manager) Start(ctx context.Context) {
	m.loopMu.Lock()
	defer m.loopMu.Unlock()
	if m.done != nil {
		return
	}
	ctx, m.cancel = context.WithCancel(ctx)
	m.done = make(chan struct{})
	go m.loop(ctx, m.done)
}

// Stop ends the loop started by Start and waits for it.
func (m *Manager) Stop() {
	m.loopMu.Lock()
	cancel, done := m.cancel, m.done
	m.loopMu.Unlock()
	if cancel == nil {
		return
	}
	cancel()
	<-done
}

func (m *Manager) loop(ctx context.Context, done chan struct{}) {
	defer close(done)
	t := time.NewTicker(m.o.ReloadInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		rctx, cancel := context.WithTimeout(ctx, max(m.o.ReloadInterval, 5*time.Second))
		err := m.Reload(rctx)
		cancel()
		if err != nil && ctx.Err() == nil {
			m.o.Logger.WarnContext(ctx, "signing keys: reload failed; keeping the keys loaded before",
				"err", err, "signing_stops_at", m.snap.Load().loadedAt.Add(m.o.PrePublish))
		}
	}
}
