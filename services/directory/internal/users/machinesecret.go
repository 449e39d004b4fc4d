package users

import (
	"context"

	"github.com/gatehouse-id/gatehouse/pkg/db"
	"github.com/gatehouse-id/gatehouse/pkg/secrets"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/apierr"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/eventstore"
)

// SecretBytes is the entropy of a generated machine secret.
const SecretBytes = 32

// SecretSet is the payload of EventSecretSet: the client id and the keyed
// hash of the secret (never the secret).
type SecretSet struct {
	ClientID   string `json:"clientId"`
	SecretHash []byte `json:"secretHash"`
}

func registerMachineSecret(es *eventstore.Store) {
	es.Register(EventSecretSet, func(ctx context.Context, tx db.Querier, e eventstore.Event) error {
		var p SecretSet
		if err := e.Unmarshal(&p); err != nil {
			return err
		}
		// A replaced secret is a credential withdrawn: what it got (its
		// tokens, the impersonations it made) goes with it.
		var had int
		if err := tx.Get(ctx, &had, `SELECT COUNT(*) FROM users WHERE id = ? AND secret_hash IS NOT NULL`, e.AggregateID); err != nil {
			return err
		}
		if had > 0 {
			if err := CutAccess(ctx, tx, e.AggregateID, e.CreatedAt); err != nil {
				return err
			}
		}
		if _, err := tx.Exec(ctx, `UPDATE users SET client_id = ?, secret_hash = ? WHERE id = ?`,
			p.ClientID, p.SecretHash, e.AggregateID); err != nil {
			return err
		}
		return touch(ctx, tx, e)
	})
	es.Register(EventSecretRemoved, func(ctx context.Context, tx db.Querier, e eventstore.Event) error {
		// client_id is set exactly while a secret is: without a secret the
		// machine user is no client_credentials client.
		if _, err := tx.Exec(ctx, `UPDATE users SET client_id = NULL, secret_hash = NULL WHERE id = ?`, e.AggregateID); err != nil {
			return err
		}
		if err := CutAccess(ctx, tx, e.AggregateID, e.CreatedAt); err != nil {
			return err
		}
		return touch(ctx, tx, e)
	})
}

// Hasher computes the stored form of a secret (secrets.Hasher).
type Hasher interface {
	Hash(secret string) []byte
}

var _ Hasher = (*secrets.Hasher)(nil)

// GenerateSecret gives a machine user a new random client secret, replacing
// any previous one. The client id is the user's login name
// (userName@primaryDomain), unique in the instance; only h.Hash(secret) is
// stored. The secret is returned to be shown once. A human user is NotFound.
func (c *Commands) GenerateSecret(ctx context.Context, editor string, u *User, h Hasher) (clientID, secret string, evs []eventstore.Event, err error) {
	if u.Type != TypeMachine {
		return "", "", nil, apierr.NotFound("USER-not-machine", "machine user not found")
	}
	clientID = u.LoginName()
	secret = secrets.RandomToken(SecretBytes)
	evs, err = c.push(ctx, editor, u, EventSecretSet, SecretSet{ClientID: clientID, SecretHash: h.Hash(secret)})
	if err != nil {
		return "", "", nil, err
	}
	return clientID, secret, evs, nil
}

// RemoveSecret removes a machine user's secret; without one it is Aborted
// (409: nothing to change). A human user is NotFound.
func (c *Commands) RemoveSecret(ctx context.Context, editor string, u *User) ([]eventstore.Event, error) {
	if u.Type != TypeMachine {
		return nil, apierr.NotFound("USER-not-machine", "machine user not found")
	}
	if len(u.SecretHash) == 0 {
		return nil, apierr.Precondition("USER-no-secret", "the machine user has no secret")
	}
	return c.push(ctx, editor, u, EventSecretRemoved, struct{}{})
}

// ByClientID returns the machine user whose secret authenticates as
// clientID, or db.ErrNotFound (also when the user has no secret). Callers
// check the state and verify the secret against SecretHash.
func (q *Queries) ByClientID(ctx context.Context, clientID string) (*User, error) {
	var u User
	if err := q.DB.Get(ctx, &u, `SELECT `+Columns+From+` WHERE u.client_id = ?`, clientID); err != nil {
		return nil, db.NotFound(err)
	}
	return &u, nil
}
