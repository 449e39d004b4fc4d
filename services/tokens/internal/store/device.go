package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/gatehouse-id/gatehouse/pkg/db"
)

// Device authorization states (RFC 8628 §3.5's answers to a poll).
const (
	DevicePending  = "pending"
	DeviceApproved = "approved"
	DeviceDenied   = "denied"
)

// DeviceCode is a device authorization (RFC 8628). Both codes are stored
// only as keyed hashes; the login fields are set when the person approves.
type DeviceCode struct {
	ID             string     `db:"id"`
	DeviceCodeHash []byte     `db:"device_code_hash"`
	UserCodeHash   []byte     `db:"user_code_hash"`
	ClientID       string     `db:"client_id"`
	ScopesRaw      string     `db:"scopes"`
	CreatedAt      time.Time  `db:"created_at"`
	ExpiresAt      time.Time  `db:"expires_at"`
	Interval       int64      `db:"poll_interval"` // seconds
	Polls          int64      `db:"polls"`
	PolledAt       *time.Time `db:"polled_at"`
	State          string     `db:"state"`
	Subject        string     `db:"subject"`
	OrgID          string     `db:"org_id"`
	SessionID      string     `db:"session_id"`
	AuthTime       *time.Time `db:"auth_time"`
	AMRRaw         string     `db:"amr"`
	UsedAt         *time.Time `db:"used_at"`
	// IssuedAccessID and IssuedRefreshFamily are what the redemption issued.
	IssuedAccessID      *string `db:"issued_access_id"`
	IssuedRefreshFamily *string `db:"issued_refresh_family"`
}

// Scopes returns the requested scopes.
func (d *DeviceCode) Scopes() []string { return strings.Fields(d.ScopesRaw) }

// AMR returns the approving login's authentication methods.
func (d *DeviceCode) AMR() []string { return decodeList(d.AMRRaw) }

const deviceColumns = `id, device_code_hash, user_code_hash, client_id, scopes, created_at, expires_at, poll_interval, polls, polled_at,
	state, subject, org_id, session_id, auth_time, amr, used_at, issued_access_id, issued_refresh_family`

// ErrUserCodeTaken: another live authorization has the same user code
// (the caller draws another).
var ErrUserCodeTaken = errors.New("user code taken")

// InsertDeviceCode records a new, pending authorization.
func (s *Store) InsertDeviceCode(ctx context.Context, d *DeviceCode) error {
	_, err := s.DB.Exec(ctx, `INSERT INTO device_codes (id, device_code_hash, user_code_hash, client_id, scopes, created_at,
		expires_at, poll_interval, state) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		d.ID, d.DeviceCodeHash, d.UserCodeHash, d.ClientID, d.ScopesRaw, d.CreatedAt, d.ExpiresAt, d.Interval, DevicePending)
	if db.IsUniqueViolation(err) {
		return ErrUserCodeTaken
	}
	if err != nil {
		return fmt.Errorf("record device authorization: %w", err)
	}
	return nil
}

// DeviceCodeByHash finds an authorization by its device code's keyed
// hash; ErrNotFound if unknown.
func (s *Store) DeviceCodeByHash(ctx context.Context, hash []byte) (*DeviceCode, error) {
	return getDeviceCode(ctx, s.DB, `SELECT `+deviceColumns+` FROM device_codes WHERE device_code_hash = ?`, hash)
}

// DeviceCodeByUserCode finds an authorization by its user code's keyed
// hash; ErrNotFound if unknown.
func (s *Store) DeviceCodeByUserCode(ctx context.Context, hash []byte) (*DeviceCode, error) {
	return getDeviceCode(ctx, s.DB, `SELECT `+deviceColumns+` FROM device_codes WHERE user_code_hash = ?`, hash)
}

// DeviceCodeByID finds an authorization by id; ErrNotFound if unknown.
func (s *Store) DeviceCodeByID(ctx context.Context, q db.Querier, id string) (*DeviceCode, error) {
	return getDeviceCode(ctx, s.q(q), `SELECT `+deviceColumns+` FROM device_codes WHERE id = ?`, id)
}

func getDeviceCode(ctx context.Context, q db.Querier, query string, arg any) (*DeviceCode, error) {
	var d DeviceCode
	err := q.Get(ctx, &d, query, arg)
	if errors.Is(db.NotFound(err), db.ErrNotFound) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("find device authorization: %w", err)
	}
	return &d, nil
}

// PollDeviceCode records a poll of d (as read) at now. A poll sooner
// than the interval after the previous one, less tolerance (a client
// waiting exactly the interval reaches the server with some jitter), is
// too fast: the interval grows by slowDown for this and every later poll
// (RFC 8628 §3.5), and it reports true. The update is conditional on the
// poll count read, so of parallel polls one passes and the others are too
// fast.
func (s *Store) PollDeviceCode(ctx context.Context, d *DeviceCode, now time.Time, tolerance, slowDown time.Duration) (tooFast bool, err error) {
	q := s.DB.Relaxed() // a poll time lost in a power failure lets one poll through early
	tooFast = d.PolledAt != nil && now.Before(d.PolledAt.Add(time.Duration(d.Interval)*time.Second-tolerance))
	if !tooFast {
		res, err := q.Exec(ctx, `UPDATE device_codes SET polled_at = ?, polls = polls + 1 WHERE id = ? AND polls = ?`, now, d.ID, d.Polls)
		if err != nil {
			return false, fmt.Errorf("record device poll: %w", err)
		}
		n, err := res.RowsAffected()
		if err != nil {
			return false, fmt.Errorf("record device poll: %w", err)
		}
		if n == 1 {
			return false, nil
		}
	}
	_, err = q.Exec(ctx, `UPDATE device_codes SET polled_at = ?, polls = polls + 1, poll_interval = poll_interval + ? WHERE id = ?`,
		now, int64(slowDown/time.Second), d.ID)
	if err != nil {
		return true, fmt.Errorf("record device poll: %w", err)
	}
	return true, nil
}

// DecideDeviceCode records the person's decision on a pending,
// unexpired authorization: approved with the login (subject, org,
// session, auth time, amr), or denied. It reports false when the
// authorization is no longer pending or has expired.
func (s *Store) DecideDeviceCode(ctx context.Context, d *DeviceCode, now time.Time) (bool, error) {
	res, err := s.DB.Exec(ctx, `UPDATE device_codes SET state = ?, subject = ?, org_id = ?, session_id = ?, auth_time = ?, amr = ?
		WHERE id = ? AND state = ? AND expires_at > ?`,
		d.State, d.Subject, d.OrgID, d.SessionID, d.AuthTime, d.AMRRaw, d.ID, DevicePending, now)
	if err != nil {
		return false, fmt.Errorf("record device decision: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("record device decision: %w", err)
	}
	return n == 1, nil
}

// ClaimDeviceCode marks an approved, unused, unexpired authorization used
// at now and records what it issued, in one statement; of concurrent
// claims exactly one gets true. Run it in the transaction that stores
// what the redemption issues.
func (s *Store) ClaimDeviceCode(ctx context.Context, q db.Querier, id, accessID, refreshFamily string, now time.Time) (bool, error) {
	res, err := s.q(q).Exec(ctx, `UPDATE device_codes SET used_at = ?, issued_access_id = ?, issued_refresh_family = ?
		WHERE id = ? AND state = ? AND used_at IS NULL AND expires_at > ?`,
		now, nullable(accessID), nullable(refreshFamily), id, DeviceApproved, now)
	if err != nil {
		return false, fmt.Errorf("claim device authorization: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("claim device authorization: %w", err)
	}
	return n == 1, nil
}

// voidDevice expires the unredeemed authorizations matching where (a
// logout, a user's cut-off, a withdrawn grant): a later poll gets
// expired_token. Pending ones of the cut are included only by subject
// (they have none yet), so where always names approved ones.
func voidDevice(ctx context.Context, q db.Querier, what, where string, args ...any) error {
	_, err := q.Exec(ctx, `UPDATE device_codes SET expires_at = created_at WHERE used_at IS NULL AND state = '`+DeviceApproved+`' AND `+where, args...)
	if err != nil {
		return fmt.Errorf("void %s device authorizations: %w", what, err)
	}
	return nil
}
