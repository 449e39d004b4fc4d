package lifecycle

import (
	"context"
	"time"

	"github.com/gatehouse-id/gatehouse/pkg/db"
	tokensv1 "github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/tokens/v1"
	"github.com/gatehouse-id/gatehouse/services/tokens/internal/revocation"
	"github.com/gatehouse-id/gatehouse/services/tokens/internal/store"
)

// RevokeSession implements TokenService.RevokeSession (logout, see the
// proto): in one transaction it voids the session's unused codes, revokes
// its refresh tokens, finds its live access tokens (those recorded with
// the session, and those issued with its refresh tokens) and queues a
// back-channel logout for every app that received tokens in the session;
// then it puts the access tokens on the revocation list. Only then does
// it answer, so a success is durable; the logouts are sent in the
// background (backchannel.Outbox), never holding up the answer.
//
// Every refresh token of the session is revoked, offline_access or not
// (Back-Channel Logout 1.0 §2.7 asks it only for those without): refresh
// tokens are issued only with offline_access here, and one that outlived
// the logout of the session it came from would keep the app signed in.
func (l *Lifecycle) RevokeSession(ctx context.Context, req *tokensv1.RevokeSessionRequest) (*tokensv1.RevokeSessionResponse, error) {
	sid := req.GetSessionId()
	if sid == "" || len(sid) > maxID {
		return nil, invalidArgument("session_id is required (at most %d characters)", maxID)
	}
	now := l.Now()
	var (
		live   []store.Live
		queued int64
	)
	err := l.Store.DB.InTx(ctx, func(tx *db.Tx) error {
		if err := l.Store.VoidSessionAuthCodes(ctx, tx, sid, now); err != nil {
			return err
		}
		if err := l.Store.RevokeSessionRefreshTokens(ctx, tx, sid, now); err != nil {
			return err
		}
		var err error
		if queued, err = l.Store.QueueSessionLogouts(ctx, tx, sid, now); err != nil {
			return err
		}
		// Its ID tokens stay valid JWTs until they expire: none of them is
		// the subject of a token exchange from now on.
		if err := l.Store.EndSession(ctx, tx, sid, now.Add(l.Minter.IDTTL)); err != nil {
			return err
		}
		live, err = l.Store.SessionAccessTokens(ctx, tx, sid, now)
		return err
	})
	if err == nil {
		l.kickLogouts(queued)
		err = l.push(ctx, live)
	}
	if err != nil {
		return nil, l.unavailable(ctx, err)
	}
	return &tokensv1.RevokeSessionResponse{}, nil
}

// RevokeGrantTokens implements TokenService.RevokeGrantTokens: in one
// transaction, for each client, it voids the codes and revokes the refresh
// tokens of the organization's users issued up to not_after and finds
// their live access tokens; then it puts those on the revocation list.
func (l *Lifecycle) RevokeGrantTokens(ctx context.Context, req *tokensv1.RevokeGrantTokensRequest) (*tokensv1.RevokeGrantTokensResponse, error) {
	m := req
	org := m.GetOrgId()
	if org == "" || len(org) > maxID || len(m.GetClientIds()) == 0 || len(m.GetClientIds()) > maxGrantClients {
		return nil, invalidArgument("org_id and 1 to %d client_ids are required", maxGrantClients)
	}
	for _, c := range m.GetClientIds() {
		if c == "" || len(c) > maxID {
			return nil, invalidArgument("client_ids have 1 to %d characters", maxID)
		}
	}
	if m.GetNotAfter() == nil || m.GetNotAfter().CheckValid() != nil {
		return nil, invalidArgument("not_after is required")
	}
	notAfter, now := m.GetNotAfter().AsTime(), l.Now()
	var live []store.Live
	err := l.Store.DB.InTx(ctx, func(tx *db.Tx) error {
		live = live[:0]
		for _, c := range m.GetClientIds() {
			got, err := l.Store.CutGrant(ctx, tx, c, org, notAfter, now)
			if err != nil {
				return err
			}
			live = append(live, got...)
		}
		// What other clients got from those tokens by token exchange
		// carries the project's audience too.
		ids := make([]string, len(live))
		for i, t := range live {
			ids[i] = t.ID
		}
		exchanged, err := l.Store.ExchangedFrom(ctx, tx, ids, now)
		live = append(live, exchanged...)
		return err
	})
	if err == nil {
		err = l.push(ctx, live)
	}
	if err != nil {
		return nil, l.unavailable(ctx, err)
	}
	return &tokensv1.RevokeGrantTokensResponse{}, nil
}

// maxGrantClients bounds the clients of one RevokeGrantTokens call (a
// project's applications).
const maxGrantClients = 1000

// RevokeUserTokens implements TokenService.RevokeUserTokens: in one
// transaction it voids the user's unused codes, revokes its refresh
// tokens issued up to not_after and queues a back-channel logout for
// every app that received tokens, up to not_after, in one of the user's
// sessions (the cut-off ends those sessions: deactivation, removal, "sign
// out everywhere"); then it puts the user's entry on the revocation list,
// which revokes every access token of the user issued up to not_after,
// recorded or not, on every replica. A repeated call (the directory
// retries) queues nothing twice.
func (l *Lifecycle) RevokeUserTokens(ctx context.Context, req *tokensv1.RevokeUserTokensRequest) (*tokensv1.RevokeUserTokensResponse, error) {
	uid := req.GetUserId()
	if uid == "" || len(uid) > maxID {
		return nil, invalidArgument("user_id is required (at most %d characters)", maxID)
	}
	if req.GetNotAfter() == nil || req.GetNotAfter().CheckValid() != nil {
		return nil, invalidArgument("not_after is required")
	}
	notAfter := req.GetNotAfter().AsTime()
	now := l.Now()
	var (
		queued int64
		// The tokens the user got as an impersonator are its credentials
		// too: they go with it.
		impersonated []store.Live
	)
	err := l.Store.DB.InTx(ctx, func(tx *db.Tx) error {
		if err := l.Store.VoidUserAuthCodes(ctx, tx, uid, notAfter, now); err != nil {
			return err
		}
		var err error
		if impersonated, err = l.Store.Impersonations(ctx, tx, "", uid, notAfter, now); err != nil {
			return err
		}
		if err := l.Store.RevokeUserRefreshTokens(ctx, tx, uid, notAfter, now); err != nil {
			return err
		}
		queued, err = l.Store.QueueUserLogouts(ctx, tx, uid, notAfter, now)
		return err
	})
	if err == nil {
		err = l.push(ctx, impersonated)
	}
	if err == nil {
		l.kickLogouts(queued)
		err = l.Revoked.RevokeMany(ctx, []string{revocation.UserKey(uid)}, []time.Time{revocation.UserUntil(notAfter, l.Minter.AccessTTL)})
	}
	if err != nil {
		return nil, l.unavailable(ctx, err)
	}
	return &tokensv1.RevokeUserTokensResponse{}, nil
}

// RevokeImpersonations implements TokenService.RevokeImpersonations: the
// access tokens impersonations issued for org's users up to not_after go
// on the revocation list.
func (l *Lifecycle) RevokeImpersonations(ctx context.Context, req *tokensv1.RevokeImpersonationsRequest) (*tokensv1.RevokeImpersonationsResponse, error) {
	org := req.GetOrgId()
	if org == "" || len(org) > maxID {
		return nil, invalidArgument("org_id is required (at most %d characters)", maxID)
	}
	if req.GetNotAfter() == nil || req.GetNotAfter().CheckValid() != nil {
		return nil, invalidArgument("not_after is required")
	}
	live, err := l.Store.Impersonations(ctx, nil, org, "", req.GetNotAfter().AsTime(), l.Now())
	if err == nil {
		err = l.push(ctx, live)
	}
	if err != nil {
		return nil, l.unavailable(ctx, err)
	}
	return &tokensv1.RevokeImpersonationsResponse{}, nil
}
