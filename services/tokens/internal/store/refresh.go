package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/gatehouse-id/gatehouse/pkg/db"
)

// RefreshToken is a refresh token record. All tokens rotated from one
// login share FamilyID. A rotated token keeps its row (UsedAt,
// ReplacedBy) so that its reuse is recognised.
type RefreshToken struct {
	ID        string  `db:"id"`
	TokenHash []byte  `db:"token_hash"`
	FamilyID  string  `db:"family_id"`
	ClientID  string  `db:"client_id"`
	Subject   string  `db:"subject"`
	OrgID     string  `db:"org_id"`
	ScopesRaw string  `db:"scopes"`
	AudRaw    string  `db:"audience"`
	SessionID *string `db:"session_id"`
	// AuthTime is the original login's (OIDC Core §12.2).
	AuthTime  time.Time `db:"auth_time"`
	AMRRaw    string    `db:"amr"`
	CreatedAt time.Time `db:"created_at"`
	// ExpiresAt is the idle expiry, never past FamilyExpiresAt (the
	// absolute expiry of the login).
	ExpiresAt       time.Time  `db:"expires_at"`
	FamilyExpiresAt time.Time  `db:"family_expires_at"`
	UsedAt          *time.Time `db:"used_at"`
	ReplacedBy      *string    `db:"replaced_by"`
	RevokedAt       *time.Time `db:"revoked_at"`
	// GraceUses counts the siblings this token was redeemed for after its
	// rotation, within the reuse grace (ClaimRefreshSibling).
	GraceUses int `db:"grace_uses"`
	// JKT is the thumbprint of the DPoP key a public client's refresh
	// token is bound to (RFC 9449 §5); nil when unbound.
	JKT *string `db:"jkt"`
}

// Scopes returns the scopes originally granted (a refresh may narrow the
// access token's, never these).
func (r *RefreshToken) Scopes() []string { return strings.Fields(r.ScopesRaw) }

// Audience returns the ID token audience of the original login.
func (r *RefreshToken) Audience() []string { return decodeList(r.AudRaw) }

// AMR returns the original login's authentication methods.
func (r *RefreshToken) AMR() []string { return decodeList(r.AMRRaw) }

// Session returns the browser session id, "" if none.
func (r *RefreshToken) Session() string {
	if r.SessionID == nil {
		return ""
	}
	return *r.SessionID
}

const refreshColumns = `id, token_hash, family_id, client_id, subject, org_id, scopes, audience, session_id,
	auth_time, amr, created_at, expires_at, family_expires_at, used_at, replaced_by, revoked_at, grace_uses, jkt`

// InsertRefreshToken records a refresh token.
func (s *Store) InsertRefreshToken(ctx context.Context, q db.Querier, r *RefreshToken) error {
	_, err := s.q(q).Exec(ctx, `INSERT INTO refresh_tokens (id, token_hash, family_id, client_id, subject, org_id,
		scopes, audience, session_id, auth_time, amr, created_at, expires_at, family_expires_at, jkt)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		r.ID, r.TokenHash, r.FamilyID, r.ClientID, r.Subject, r.OrgID, r.ScopesRaw, r.AudRaw, r.SessionID,
		r.AuthTime, r.AMRRaw, r.CreatedAt, r.ExpiresAt, r.FamilyExpiresAt, r.JKT)
	if err != nil {
		return fmt.Errorf("record refresh token: %w", err)
	}
	return nil
}

// RefreshTokenByHash finds a refresh token by its keyed hash; ErrNotFound
// if unknown.
func (s *Store) RefreshTokenByHash(ctx context.Context, q db.Querier, hash []byte) (*RefreshToken, error) {
	return getRefresh(ctx, s.q(q), `SELECT `+refreshColumns+` FROM refresh_tokens WHERE token_hash = ?`, hash)
}

// RefreshTokenByID finds a refresh token by id; ErrNotFound if unknown.
func (s *Store) RefreshTokenByID(ctx context.Context, q db.Querier, id string) (*RefreshToken, error) {
	return getRefresh(ctx, s.q(q), `SELECT `+refreshColumns+` FROM refresh_tokens WHERE id = ?`, id)
}

func getRefresh(ctx context.Context, q db.Querier, query string, arg any) (*RefreshToken, error) {
	var r RefreshToken
	err := q.Get(ctx, &r, query, arg)
	if errors.Is(db.NotFound(err), db.ErrNotFound) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("find refresh token: %w", err)
	}
	return &r, nil
}

// MarkRefreshUsed marks a live (unused, unrevoked) refresh token as
// rotated into replacedBy at now. It reports false when the token was
// already used or revoked: of several concurrent rotations of one token,
// exactly one (the first to commit) gets true. Run it in the transaction
// that inserts the replacement.
func (s *Store) MarkRefreshUsed(ctx context.Context, q db.Querier, id, replacedBy string, now time.Time) (bool, error) {
	res, err := s.q(q).Exec(ctx, `UPDATE refresh_tokens SET used_at = ?, replaced_by = ?
		WHERE id = ? AND used_at IS NULL AND revoked_at IS NULL`, now, replacedBy, id)
	if err != nil {
		return false, fmt.Errorf("rotate refresh token: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("rotate refresh token: %w", err)
	}
	return n == 1, nil
}

// ClaimRefreshSibling counts one more sibling of a rotated (used),
// unrevoked refresh token, if it has had fewer than max. It reports false
// otherwise: of concurrent claims, at most max in all get true. Run it in
// the transaction that inserts the sibling.
func (s *Store) ClaimRefreshSibling(ctx context.Context, q db.Querier, id string, max int) (bool, error) {
	res, err := s.q(q).Exec(ctx, `UPDATE refresh_tokens SET grace_uses = grace_uses + 1
		WHERE id = ? AND used_at IS NOT NULL AND revoked_at IS NULL AND grace_uses < ?`, id, max)
	if err != nil {
		return false, fmt.Errorf("claim a refresh token sibling: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("claim a refresh token sibling: %w", err)
	}
	return n == 1, nil
}

// RevokeRefreshFamily marks every refresh token of a family revoked at now
// (those already revoked keep their time).
func (s *Store) RevokeRefreshFamily(ctx context.Context, q db.Querier, familyID string, now time.Time) error {
	err := revokeUntilNone(ctx, s.q(q), `UPDATE refresh_tokens SET revoked_at = ? WHERE family_id = ? AND revoked_at IS NULL`, now, familyID)
	if err != nil {
		return fmt.Errorf("revoke refresh token family: %w", err)
	}
	return nil
}

// RevokeSessionRefreshTokens marks every refresh token of a browser
// session revoked at now.
func (s *Store) RevokeSessionRefreshTokens(ctx context.Context, q db.Querier, sessionID string, now time.Time) error {
	err := revokeUntilNone(ctx, s.q(q), `UPDATE refresh_tokens SET revoked_at = ? WHERE session_id = ? AND revoked_at IS NULL`, now, sessionID)
	if err != nil {
		return fmt.Errorf("revoke the session's refresh tokens: %w", err)
	}
	return nil
}

// maxRevokeRounds bounds revokeUntilNone; each round after the first only
// finds rows that concurrent rotations committed meanwhile.
const maxRevokeRounds = 20

// revokeUntilNone repeats an UPDATE until it changes no row. On PostgreSQL
// (READ COMMITTED) an UPDATE that waited for a concurrent rotation
// re-checks only the rows it saw when it started, so the replacement that
// rotation inserted is found by the next round, which takes a fresh
// snapshot. Rows revoked in earlier rounds stay locked by the transaction,
// so no rotation of them can commit before it does. (SQLite serialises
// writers: one round suffices.)
func revokeUntilNone(ctx context.Context, q db.Querier, query string, args ...any) error {
	for range maxRevokeRounds {
		res, err := q.Exec(ctx, query, args...)
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		if err != nil {
			return err
		}
		if n == 0 {
			return nil
		}
	}
	return errors.New("refresh tokens kept appearing while revoking them")
}

// Live is an access token that has not expired: what a revocation must
// put on the revocation list, until ExpiresAt.
type Live struct {
	ID        string    `db:"id"`
	ExpiresAt time.Time `db:"expires_at"`
}

// FamilyAccessTokens returns the unexpired access tokens issued with any
// refresh token of a family.
func (s *Store) FamilyAccessTokens(ctx context.Context, q db.Querier, familyID string, now time.Time) ([]Live, error) {
	return selectLive(ctx, s.q(q), `SELECT id, expires_at FROM access_tokens
		WHERE refresh_id IN (SELECT id FROM refresh_tokens WHERE family_id = ?) AND expires_at > ? ORDER BY id`, familyID, now)
}

// SessionAccessTokens returns the unexpired access tokens of a browser
// session: recorded with it, or issued with a refresh token of it. Two
// branches of a UNION, each on its index: PostgreSQL plans "session_id = ?
// OR refresh_id IN (…)" as a read of the whole table (make bench-scale).
func (s *Store) SessionAccessTokens(ctx context.Context, q db.Querier, sessionID string, now time.Time) ([]Live, error) {
	return selectLive(ctx, s.q(q), `SELECT id, expires_at FROM access_tokens WHERE session_id = ? AND expires_at > ?
		UNION
		SELECT a.id, a.expires_at FROM access_tokens a JOIN refresh_tokens r ON r.id = a.refresh_id WHERE r.session_id = ? AND a.expires_at > ?
		ORDER BY id`, sessionID, now, sessionID, now)
}

// AccessTokenLive returns the access token id if it is recorded and
// unexpired (nil otherwise).
func (s *Store) AccessTokenLive(ctx context.Context, q db.Querier, id string, now time.Time) ([]Live, error) {
	return selectLive(ctx, s.q(q), `SELECT id, expires_at FROM access_tokens WHERE id = ? AND expires_at > ?`, id, now)
}

func selectLive(ctx context.Context, q db.Querier, query string, args ...any) ([]Live, error) {
	var out []Live
	if err := q.Select(ctx, &out, query, args...); err != nil {
		return nil, fmt.Errorf("find access tokens to revoke: %w", err)
	}
	return out, nil
}

// RevokeUserRefreshTokens marks every refresh token of subject created at
// or before notAfter revoked at now.
func (s *Store) RevokeUserRefreshTokens(ctx context.Context, q db.Querier, subject string, notAfter, now time.Time) error {
	err := revokeUntilNone(ctx, s.q(q), `UPDATE refresh_tokens SET revoked_at = ? WHERE subject = ? AND created_at <= ? AND revoked_at IS NULL`,
		now, subject, notAfter)
	if err != nil {
		return fmt.Errorf("revoke the user's refresh tokens: %w", err)
	}
	return nil
}
