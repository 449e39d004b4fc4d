package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/gatehouse-id/gatehouse/pkg/db"
)

// AuthCode is an authorization code record. The code itself is stored
// only as a keyed hash. The row outlives its use (UsedAt) so that a replay
// can find, and revoke, what the first use issued.
type AuthCode struct {
	ID            string     `db:"id"`
	CodeHash      []byte     `db:"code_hash"`
	ClientID      string     `db:"client_id"`
	RedirectURI   string     `db:"redirect_uri"`
	Subject       string     `db:"subject"`
	OrgID         string     `db:"org_id"`
	ScopesRaw     string     `db:"scopes"`
	Nonce         string     `db:"nonce"`
	CodeChallenge string     `db:"code_challenge"`
	SessionID     string     `db:"session_id"`
	AuthTime      time.Time  `db:"auth_time"`
	AMRRaw        string     `db:"amr"`
	CreatedAt     time.Time  `db:"created_at"`
	ExpiresAt     time.Time  `db:"expires_at"`
	UsedAt        *time.Time `db:"used_at"`
	// IssuedAccessID and IssuedRefreshFamily are what the exchange issued.
	IssuedAccessID      *string `db:"issued_access_id"`
	IssuedRefreshFamily *string `db:"issued_refresh_family"`
	// DPoPJKT is the DPoP key the code must be redeemed with (RFC 9449
	// §10); "" when unbound.
	DPoPJKT string `db:"dpop_jkt"`
}

// Scopes returns the granted scopes.
func (c *AuthCode) Scopes() []string { return strings.Fields(c.ScopesRaw) }

// AMR returns the authentication methods.
func (c *AuthCode) AMR() []string { return decodeList(c.AMRRaw) }

// EncodeScopes is the stored form of a scope list.
func EncodeScopes(scopes []string) string { return strings.Join(scopes, " ") }

// EncodeList is the stored form of an audience or amr list.
func EncodeList(v []string) string {
	if v == nil {
		v = []string{}
	}
	b, _ := json.Marshal(v) // a []string always encodes
	return string(b)
}

func decodeList(raw string) []string {
	var out []string
	_ = json.Unmarshal([]byte(raw), &out)
	return out
}

const authCodeColumns = `id, code_hash, client_id, redirect_uri, subject, org_id, scopes, nonce, code_challenge,
	session_id, auth_time, amr, created_at, expires_at, used_at, issued_access_id, issued_refresh_family, dpop_jkt`

// InsertAuthCode records a new, unused code.
func (s *Store) InsertAuthCode(ctx context.Context, c *AuthCode) error {
	// A code lost in a power failure cannot be redeemed: the user signs in
	// again (db.DB.Relaxed). Redeeming it commits durably.
	_, err := s.DB.Relaxed().Exec(ctx, `INSERT INTO auth_codes (id, code_hash, client_id, redirect_uri, subject, org_id, scopes,
		nonce, code_challenge, session_id, auth_time, amr, created_at, expires_at, dpop_jkt) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		c.ID, c.CodeHash, c.ClientID, c.RedirectURI, c.Subject, c.OrgID, c.ScopesRaw, c.Nonce, c.CodeChallenge,
		c.SessionID, c.AuthTime, c.AMRRaw, c.CreatedAt, c.ExpiresAt, c.DPoPJKT)
	if err != nil {
		return fmt.Errorf("record authorization code: %w", err)
	}
	return nil
}

// AuthCodeByHash finds a code by its keyed hash; ErrNotFound if unknown.
func (s *Store) AuthCodeByHash(ctx context.Context, q db.Querier, hash []byte) (*AuthCode, error) {
	return getAuthCode(ctx, s.q(q), `SELECT `+authCodeColumns+` FROM auth_codes WHERE code_hash = ?`, hash)
}

// AuthCodeByID finds a code by id; ErrNotFound if unknown.
func (s *Store) AuthCodeByID(ctx context.Context, q db.Querier, id string) (*AuthCode, error) {
	return getAuthCode(ctx, s.q(q), `SELECT `+authCodeColumns+` FROM auth_codes WHERE id = ?`, id)
}

func getAuthCode(ctx context.Context, q db.Querier, query string, arg any) (*AuthCode, error) {
	var c AuthCode
	err := q.Get(ctx, &c, query, arg)
	if errors.Is(db.NotFound(err), db.ErrNotFound) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("find authorization code: %w", err)
	}
	return &c, nil
}

// ClaimAuthCode marks an unused, unexpired code used at now and records
// what it issued (empty values stay NULL), in one statement. It reports
// false when the code was already used or has expired (or was voided by a
// logout meanwhile): of several concurrent claims, exactly one (the first
// to commit) gets true. Run it in the transaction that stores what the
// code issues, so a lost claim stores nothing.
func (s *Store) ClaimAuthCode(ctx context.Context, q db.Querier, id, accessID, refreshFamily string, now time.Time) (bool, error) {
	res, err := s.q(q).Exec(ctx, `UPDATE auth_codes SET used_at = ?, issued_access_id = ?, issued_refresh_family = ?
		WHERE id = ? AND used_at IS NULL AND expires_at > ?`, now, nullable(accessID), nullable(refreshFamily), id, now)
	if err != nil {
		return false, fmt.Errorf("claim authorization code: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("claim authorization code: %w", err)
	}
	return n == 1, nil
}

// VoidSessionAuthCodes expires the unused codes of a session (logout):
// their expiry becomes their creation time, which precedes any exchange,
// so a claim that was waiting on the row fails too. Device authorizations
// the session approved and that were not redeemed yet go the same way.
func (s *Store) VoidSessionAuthCodes(ctx context.Context, q db.Querier, sessionID string, now time.Time) error {
	_, err := s.q(q).Exec(ctx, `UPDATE auth_codes SET expires_at = created_at WHERE session_id = ? AND used_at IS NULL AND expires_at > ?`,
		sessionID, now)
	if err != nil {
		return fmt.Errorf("void the session's authorization codes: %w", err)
	}
	return voidDevice(ctx, s.q(q), "the session's", `session_id = ? AND expires_at > ?`, sessionID, now)
}

// VoidUserAuthCodes expires the unused codes of subject created at or
// before notAfter, as VoidSessionAuthCodes does.
func (s *Store) VoidUserAuthCodes(ctx context.Context, q db.Querier, subject string, notAfter, now time.Time) error {
	_, err := s.q(q).Exec(ctx, `UPDATE auth_codes SET expires_at = created_at WHERE subject = ? AND created_at <= ? AND used_at IS NULL AND expires_at > ?`,
		subject, notAfter, now)
	if err != nil {
		return fmt.Errorf("void the user's authorization codes: %w", err)
	}
	return voidDevice(ctx, s.q(q), "the user's", `subject = ? AND auth_time <= ? AND expires_at > ?`, subject, notAfter, now)
}

// q defaults a nil Querier to the database.
func (s *Store) q(q db.Querier) db.Querier {
	if q == nil {
		return s.DB
	}
	return q
}

func nullable(v string) *string {
	if v == "" {
		return nil
	}
	return &v
}
