package keys

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"time"

	"github.com/gatehouse-id/gatehouse/pkg/db"
	"github.com/gatehouse-id/gatehouse/pkg/secrets"
)

// errNotDue: an automatic rotation found, inside its transaction, that the
// newest key is not yet due for a successor (another replica rotated).
var errNotDue = errors.New("no rotation due")

// Rotate creates a key with algorithm alg (empty: the configured one) that
// is published now and signs from now + PrePublish; the newest key until
// now signs until then and stays published until its tokens expire.
// Errors: ErrUnsupportedAlgorithm; ErrConcurrentRotation when another
// replica created the next key at the same moment.
func (m *Manager) Rotate(ctx context.Context, alg string) (KeyInfo, error) {
	if alg == "" {
		alg = m.o.Algorithm
	}
	if err := CheckAlgorithm(alg); err != nil {
		return KeyInfo{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	r, err := m.create(ctx, alg, true)
	if errors.Is(err, db.ErrConflict) {
		return KeyInfo{}, fmt.Errorf("%w: %w", ErrConcurrentRotation, err)
	}
	if err != nil {
		return KeyInfo{}, err
	}
	if _, err := m.load(ctx); err != nil {
		// The key is stored; replicas (and the next tick here) pick it up.
		m.o.Logger.WarnContext(ctx, "signing keys: reload after rotation failed", "err", err)
	}
	return info(r, m.o.Now()), nil
}

// create generates a key (outside the transaction: RSA generation is slow
// and SQLite transactions hold the write lock) and stores it as the next
// generation. Unless onDemand, it re-checks inside the transaction that a
// key is due (errNotDue otherwise). A lost race is db.ErrConflict.
func (m *Manager) create(ctx context.Context, alg string, onDemand bool) (*row, error) {
	priv, err := generate(alg)
	if err != nil {
		return nil, fmt.Errorf("keys: %w", err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		return nil, fmt.Errorf("keys: encode private key: %w", err)
	}
	kid := secrets.NewID()
	sealed, err := m.cipher.Encrypt(der, []byte(kid))
	clear(der)
	if err != nil {
		return nil, fmt.Errorf("keys: encrypt private key: %w", err)
	}
	_, pubJSON, err := publicJWK(kid, alg, priv.Public())
	if err != nil {
		return nil, fmt.Errorf("keys: %w", err)
	}
	r := &row{ID: kid, Algorithm: alg, PrivateKey: sealed, PublicJWK: string(pubJSON)}
	var prev *row
	err = m.db.InTx(ctx, func(tx *db.Tx) error {
		latest, err := latestRow(ctx, tx)
		if err != nil {
			return err
		}
		// Read the clock after the key was generated and the lock taken, so
		// created_at is as close to the commit as it can be.
		now := m.o.Now().UTC().Truncate(time.Microsecond)
		if !onDemand && latest != nil && !m.rotationDue(latest.SignFrom, now) {
			return errNotDue
		}
		r.CreatedAt, r.SignFrom, r.Generation = now, now.Add(m.o.PrePublish), 1
		if latest == nil {
			// The first key signs at once: no token exists yet, so no
			// cached key set can lack it (see the package doc).
			r.SignFrom = now
		} else {
			r.Generation = latest.Generation + 1
			if !r.SignFrom.After(latest.SignFrom) {
				r.SignFrom = latest.SignFrom.Add(time.Second) // keep sign_from growing with generation
			}
		}
		if err := insertRow(ctx, tx, r); err != nil {
			return err
		}
		if latest != nil {
			expires := r.SignFrom.Add(m.o.MaxTokenLifetime + m.o.ExpirySkew)
			if err := scheduleRetirement(ctx, tx, latest.ID, r.SignFrom, expires); err != nil {
				return err
			}
		}
		prev = latest
		return nil
	})
	if err != nil {
		return nil, err
	}
	attrs := []any{"kid", r.ID, "alg", r.Algorithm, "generation", r.Generation, "sign_from", r.SignFrom}
	if prev != nil {
		attrs = append(attrs, "retires", prev.ID)
	}
	m.o.Logger.InfoContext(ctx, "signing keys: created key", attrs...)
	return r, nil
}
