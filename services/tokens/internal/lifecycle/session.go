package lifecycle

import (
	"context"

	"connectrpc.com/connect"

	"github.com/gatehouse-id/gatehouse/pkg/db"
	tokensv1 "github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/tokens/v1"
	"github.com/gatehouse-id/gatehouse/services/tokens/internal/store"
)

// RevokeSession implements TokenService.RevokeSession (logout, see the
// proto): in one transaction it voids the session's unused codes, revokes
// its refresh tokens and finds its live access tokens (those recorded with
// the session, and those issued with its refresh tokens); then it puts the
// access tokens on the revocation list. Only then does it answer, so a
// success is durable.
func (l *Lifecycle) RevokeSession(ctx context.Context, req *connect.Request[tokensv1.RevokeSessionRequest]) (*connect.Response[tokensv1.RevokeSessionResponse], error) {
	sid := req.Msg.GetSessionId()
	if sid == "" || len(sid) > maxID {
		return nil, invalidArgument("session_id is required (at most %d characters)", maxID)
	}
	now := l.Now()
	var live []store.Live
	err := l.Store.DB.InTx(ctx, func(tx *db.Tx) error {
		if err := l.Store.VoidSessionAuthCodes(ctx, tx, sid, now); err != nil {
			return err
		}
		if err := l.Store.RevokeSessionRefreshTokens(ctx, tx, sid, now); err != nil {
			return err
		}
		var err error
		live, err = l.Store.SessionAccessTokens(ctx, tx, sid, now)
		return err
	})
	if err == nil {
		err = l.push(ctx, live)
	}
	if err != nil {
		return nil, l.unavailable(ctx, err)
	}
	return connect.NewResponse(&tokensv1.RevokeSessionResponse{}), nil
}
