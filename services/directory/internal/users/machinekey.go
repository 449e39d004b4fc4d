package users

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/gatehouse-id/gatehouse/pkg/db"
	"github.com/gatehouse-id/gatehouse/pkg/secrets"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/apierr"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/eventstore"
)

// Key types (the management API's KeyType numbers).
const KeyTypeJSON int32 = 1

// Limits of machine keys.
const (
	// MinKeyBits is the smallest RSA modulus accepted for a public key.
	MinKeyBits = 2048
	// MaxPublicKeyBytes bounds an uploaded PEM public key.
	MaxPublicKeyBytes = 10000
	// GeneratedKeyBits is the size of key pairs Gatehouse generates.
	GeneratedKeyBits = 2048
)

// NoExpiry is the expiration date of a key added without one.
var NoExpiry = time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC)

// MachineKey is the projection of a machine user's public key.
type MachineKey struct {
	ID     string `db:"id"`
	UserID string `db:"user_id"`
	OrgID  string `db:"org_id"`
	Type   int32  `db:"type"`
	// PublicKey is the PKIX ("PUBLIC KEY") PEM encoding.
	PublicKey      string     `db:"public_key"`
	ExpirationDate *time.Time `db:"expiration_date"`
	CreationDate   time.Time  `db:"creation_date"`
	ChangeDate     time.Time  `db:"change_date"`
	Sequence       uint64     `db:"sequence"`
}

// Expired reports whether the key is no longer accepted at now.
func (k *MachineKey) Expired(now time.Time) bool {
	return k.ExpirationDate != nil && !now.Before(*k.ExpirationDate)
}

// MachineKeyAdded is the payload of EventMachineKeyAdded. Only the public
// key is ever stored.
type MachineKeyAdded struct {
	KeyID          string    `json:"keyId"`
	Type           int32     `json:"type"`
	PublicKey      string    `json:"publicKey"`
	ExpirationDate time.Time `json:"expirationDate"`
}

// MachineKeyRemoved is the payload of EventMachineKeyRemove.
type MachineKeyRemoved struct {
	KeyID string `json:"keyId"`
}

// KeyFile is the JSON key file handed out once for a generated key; the
// JWT profile grant's assertion is signed with Key and carries KeyID as kid.
type KeyFile struct {
	Type   string `json:"type"` // "serviceaccount"
	KeyID  string `json:"keyId"`
	Key    string `json:"key"` // PKCS#1 PEM private key
	UserID string `json:"userId"`
}

func registerMachineKeys(es *eventstore.Store) {
	es.Register(EventMachineKeyAdded, func(ctx context.Context, tx db.Querier, e eventstore.Event) error {
		var p MachineKeyAdded
		if err := e.Unmarshal(&p); err != nil {
			return err
		}
		exp := p.ExpirationDate
		if _, err := tx.Exec(ctx, `INSERT INTO machine_keys (id, user_id, org_id, type, public_key, expiration_date,
			creation_date, change_date, sequence) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			p.KeyID, e.AggregateID, e.ResourceOwner, p.Type, p.PublicKey, exp, e.CreatedAt, e.CreatedAt, e.Sequence); err != nil {
			return err
		}
		return touch(ctx, tx, e)
	})
	es.Register(EventMachineKeyRemove, func(ctx context.Context, tx db.Querier, e eventstore.Event) error {
		var p MachineKeyRemoved
		if err := e.Unmarshal(&p); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `DELETE FROM machine_keys WHERE id = ? AND user_id = ?`, p.KeyID, e.AggregateID); err != nil {
			return err
		}
		// A removed key is a credential withdrawn: the machine user's
		// tokens go (it signs in again with a key it still has).
		if err := CutAccess(ctx, tx, e.AggregateID, e.CreatedAt); err != nil {
			return err
		}
		return touch(ctx, tx, e)
	})
}

// ErrInvalidPublicKey: an uploaded public key breaks a rule of
// ParsePublicKey (the wrapping error says which).
var ErrInvalidPublicKey = errors.New("invalid public key")

// ParsePublicKey validates an uploaded PEM RSA public key (PKIX "PUBLIC
// KEY" or PKCS#1 "RSA PUBLIC KEY", at least MinKeyBits, at most
// MaxPublicKeyBytes, nothing but whitespace around it) and returns its PKIX
// PEM encoding, the form that is stored. Errors wrap ErrInvalidPublicKey.
func ParsePublicKey(raw []byte) (string, error) {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: "+format, append([]any{ErrInvalidPublicKey}, args...)...)
	}
	if len(raw) > MaxPublicKeyBytes {
		return "", bad("must have at most %d bytes", MaxPublicKeyBytes)
	}
	trimmed := strings.TrimSpace(string(raw))
	block, rest := pem.Decode([]byte(trimmed))
	if block == nil || !strings.HasPrefix(trimmed, "-----BEGIN ") {
		return "", bad("is not PEM encoded")
	}
	if strings.TrimSpace(string(rest)) != "" {
		return "", bad("must contain exactly one PEM block")
	}
	var pub any
	var err error
	switch block.Type {
	case "PUBLIC KEY":
		pub, err = x509.ParsePKIXPublicKey(block.Bytes)
	case "RSA PUBLIC KEY":
		pub, err = x509.ParsePKCS1PublicKey(block.Bytes)
	default:
		return "", bad("must be a PUBLIC KEY PEM block, not %q", block.Type)
	}
	if err != nil {
		return "", bad("cannot be parsed")
	}
	rsaPub, ok := pub.(*rsa.PublicKey)
	if !ok {
		return "", bad("must be an RSA key")
	}
	if bits := rsaPub.N.BitLen(); bits < MinKeyBits {
		return "", bad("must have at least %d bits, not %d", MinKeyBits, bits)
	}
	return encodePublicKey(rsaPub)
}

func encodePublicKey(pub *rsa.PublicKey) (string, error) {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return "", fmt.Errorf("users: encode public key: %w", err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})), nil
}

// AddMachineKey registers a key of a machine user. publicKeyPEM must come
// from ParsePublicKey; when it is empty an RSA key pair is generated and
// the returned key file (JSON, shown once) carries its private key. The
// expiration must lie after now (zero: NoExpiry).
func (c *Commands) AddMachineKey(ctx context.Context, editor string, u *User, publicKeyPEM string, expiration, now time.Time) (keyID string, keyFile []byte, evs []eventstore.Event, err error) {
	if u.Type != TypeMachine {
		return "", nil, nil, apierr.NotFound("USER-not-machine", "machine user not found")
	}
	if expiration.IsZero() {
		expiration = NoExpiry
	}
	if !expiration.After(now) {
		return "", nil, nil, apierr.InvalidArgument("USER-key-expired", "expiration_date must be in the future")
	}
	keyID = secrets.NewID()
	if publicKeyPEM == "" {
		priv, err := rsa.GenerateKey(rand.Reader, GeneratedKeyBits)
		if err != nil {
			return "", nil, nil, fmt.Errorf("users: generate key: %w", err)
		}
		if publicKeyPEM, err = encodePublicKey(&priv.PublicKey); err != nil {
			return "", nil, nil, err
		}
		keyFile, err = json.Marshal(KeyFile{
			Type:   "serviceaccount",
			KeyID:  keyID,
			Key:    string(pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(priv)})),
			UserID: u.ID,
		})
		if err != nil {
			return "", nil, nil, fmt.Errorf("users: encode key file: %w", err)
		}
	}
	evs, err = c.push(ctx, editor, u, EventMachineKeyAdded, MachineKeyAdded{
		KeyID: keyID, Type: KeyTypeJSON, PublicKey: publicKeyPEM, ExpirationDate: expiration.UTC().Truncate(time.Microsecond),
	})
	if err != nil {
		return "", nil, nil, err
	}
	return keyID, keyFile, evs, nil
}

// RemoveMachineKey removes a key of the user; an unknown key (or one of
// another user) is NotFound.
func (c *Commands) RemoveMachineKey(ctx context.Context, editor string, u *User, keyID string) ([]eventstore.Event, error) {
	k, err := c.Q.MachineKey(ctx, keyID)
	if errors.Is(err, db.ErrNotFound) || (err == nil && k.UserID != u.ID) {
		return nil, apierr.NotFound("USER-key-not-found", "key not found")
	}
	if err != nil {
		return nil, err
	}
	return c.push(ctx, editor, u, EventMachineKeyRemove, MachineKeyRemoved{KeyID: keyID})
}

const keyColumns = `id, user_id, org_id, type, public_key, expiration_date, creation_date, change_date, sequence`

// MachineKey returns a machine key by id (for the JWT profile grant), or
// db.ErrNotFound. Callers check Expired and the user's state themselves.
func (q *Queries) MachineKey(ctx context.Context, keyID string) (*MachineKey, error) {
	var k MachineKey
	if err := q.DB.Get(ctx, &k, `SELECT `+keyColumns+` FROM machine_keys WHERE id = ?`, keyID); err != nil {
		return nil, db.NotFound(err)
	}
	return &k, nil
}

// MachineKeys returns one page of a user's keys ordered by creation (then
// id), and the number of keys the user has.
func (q *Queries) MachineKeys(ctx context.Context, userID string, p Page) ([]MachineKey, uint64, error) {
	var total uint64
	if err := q.DB.Get(ctx, &total, `SELECT COUNT(*) FROM machine_keys WHERE user_id = ?`, userID); err != nil {
		return nil, 0, fmt.Errorf("users: count keys: %w", err)
	}
	dir := p.direction()
	out := []MachineKey{}
	if err := q.DB.Select(ctx, &out, `SELECT `+keyColumns+` FROM machine_keys WHERE user_id = ?
		ORDER BY creation_date `+dir+`, id `+dir+` LIMIT ? OFFSET ?`, userID, int64(p.Limit), int64(p.Offset)); err != nil {
		return nil, 0, fmt.Errorf("users: list keys: %w", err)
	}
	return out, total, nil
}
