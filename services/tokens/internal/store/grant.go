package store

import (
	"context"
	"fmt"
	"time"

	"github.com/gatehouse-id/gatehouse/pkg/db"
)

// CutGrant is a project grant withdrawn at notAfter, for one client of the
// project and the organization it was granted to: it voids the client's
// unused codes and revokes its refresh tokens for users of orgID issued up
// to notAfter, and returns the live access tokens among them (for the
// revocation list). Access tokens are recorded whatever their format, so
// none escapes.
func (s *Store) CutGrant(ctx context.Context, q db.Querier, clientID, orgID string, notAfter, now time.Time) ([]Live, error) {
	q = s.q(q)
	if _, err := q.Exec(ctx, `UPDATE auth_codes SET expires_at = created_at
		WHERE client_id = ? AND org_id = ? AND created_at <= ? AND used_at IS NULL AND expires_at > ?`,
		clientID, orgID, notAfter, now); err != nil {
		return nil, fmt.Errorf("void the grant's authorization codes: %w", err)
	}
	if err := voidDevice(ctx, q, "the grant's", `client_id = ? AND org_id = ? AND auth_time <= ? AND expires_at > ?`,
		clientID, orgID, notAfter, now); err != nil {
		return nil, err
	}
	if err := revokeUntilNone(ctx, q, `UPDATE refresh_tokens SET revoked_at = ?
		WHERE client_id = ? AND org_id = ? AND created_at <= ? AND revoked_at IS NULL`,
		now, clientID, orgID, notAfter); err != nil {
		return nil, fmt.Errorf("revoke the grant's refresh tokens: %w", err)
	}
	return selectLive(ctx, q, `SELECT id, expires_at FROM access_tokens
		WHERE client_id = ? AND org_id = ? AND created_at <= ? AND expires_at > ? ORDER BY id`,
		clientID, orgID, notAfter, now)
}
