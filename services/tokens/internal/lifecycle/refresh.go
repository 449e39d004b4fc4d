package lifecycle

import (
	"context"
	"errors"
	"slices"

	"connectrpc.com/connect"

	"github.com/gatehouse-id/gatehouse/pkg/db"
	directoryv1 "github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/directory/v1"
	"github.com/gatehouse-id/gatehouse/pkg/oauth"
	"github.com/gatehouse-id/gatehouse/services/tokens/dpop"
	"github.com/gatehouse-id/gatehouse/services/tokens/internal/clients"
	"github.com/gatehouse-id/gatehouse/services/tokens/internal/kind"
	"github.com/gatehouse-id/gatehouse/services/tokens/internal/mint"
	"github.com/gatehouse-id/gatehouse/services/tokens/internal/store"
	"github.com/gatehouse-id/gatehouse/services/tokens/scope"
)

// Refresh is the refresh_token grant (RFC 6749 §6, OIDC Core §12) for
// client c, already authenticated. requested is the scope parameter
// (nil when omitted: the original scopes). The token rotates: the response
// carries a new refresh token of the same family and the presented one is
// marked used, in one transaction, so of concurrent refreshes with one
// token exactly one succeeds. OAuth errors:
//   - invalid_grant: an unknown, expired (idle or absolute), revoked or
//     already used token, one issued to another client (nothing changes),
//     or a user who is gone or no longer active. A used token presented
//     again revokes its whole family (every refresh token and the access
//     tokens issued with them), unless a confidential client presents it
//     less than ReuseGrace after its rotation and it has been redeemed
//     fewer than MaxRedemptions times: then it succeeds once more, with a
//     sibling replacement (see the package doc);
//   - invalid_scope: a scope beyond the originally granted one (RFC 6749
//     §6: it may shrink, never grow; the refresh token keeps the original).
//
// The new ID token (when openid is in the scope) keeps the original
// login's auth_time, amr, sid and audience, and has no nonce.
func (l *Lifecycle) Refresh(ctx context.Context, c *directoryv1.Client, raw string, requested []string) (*mint.Response, error) {
	if raw == "" || len(raw) > maxOpaqueLen || kind.Other(raw, kind.RefreshToken) {
		return nil, oauth.New(oauth.InvalidGrant, "the refresh token is invalid")
	}
	rt, err := l.Store.RefreshTokenByHash(ctx, nil, l.Hasher.TokenKey(raw))
	if errors.Is(err, store.ErrNotFound) {
		return nil, oauth.New(oauth.InvalidGrant, "the refresh token is invalid")
	}
	if err != nil {
		return nil, err
	}
	if rt.ClientID != c.GetClientId() {
		return nil, oauth.New(oauth.InvalidGrant, "the refresh token was issued to another client")
	}
	if rt.JKT != nil && *rt.JKT != dpop.Key(ctx) {
		// RFC 9449 §5: a public client's bound refresh token is good only
		// with a proof of its key. Checked before reuse detection: a
		// request without the key is not the client's and changes nothing.
		return nil, oauth.New(oauth.InvalidGrant, "the refresh token is bound to another DPoP key")
	}
	if err := l.refusal(ctx, rt, c); err != nil {
		return nil, err
	}
	now := l.Now()
	if !now.Before(rt.ExpiresAt) || !now.Before(rt.FamilyExpiresAt) {
		return nil, oauth.New(oauth.InvalidGrant, "the refresh token has expired")
	}
	granted := rt.Scopes()
	scopes := granted
	if len(requested) > 0 {
		for _, s := range requested {
			if !slices.Contains(granted, s) {
				return nil, oauth.New(oauth.InvalidScope, "scope %q exceeds the scope originally granted", s)
			}
		}
		scopes = requested
	}
	c, err = l.confirmPrivileges(ctx, c, rt.OrgID)
	if err != nil {
		return nil, err
	}
	r := scope.ForClient(c)
	if err := scope.Check(r, scopes); err != nil {
		return nil, err
	}
	if !scope.UserOrgAllowed(r, rt.OrgID) {
		return nil, oauth.New(oauth.InvalidGrant, "the client may no longer sign in users of this organization")
	}
	if err := l.userActive(ctx, rt.Subject); err != nil {
		return nil, err
	}
	lg := login{client: c, subject: rt.Subject, orgID: rt.OrgID, scopes: scopes, sessionID: rt.Session(),
		authTime: rt.AuthTime, amr: rt.AMR()}
	claims, err := l.tokenClaims(ctx, c, lg.subject, scopes)
	if err != nil {
		return nil, err
	}
	var (
		at        *mint.Issued
		idt, rraw string
	)
	grace := rt.UsedAt != nil // refusal let a used token through: within the grace
	err = l.Store.DB.InTx(ctx, func(tx *db.Tx) error {
		// The replacement keeps the original grant, audience, expiry and
		// DPoP binding.
		next, raw := l.newRefresh(login{client: c, subject: rt.Subject, orgID: rt.OrgID, scopes: granted,
			sessionID: lg.sessionID, authTime: rt.AuthTime, amr: lg.amr, jkt: deref(rt.JKT)}, rt.Audience(), now, rt.FamilyExpiresAt, rt.FamilyID)
		if grace {
			// A parallel refresh with the token another request has just
			// rotated: a sibling replacement of the same family, so the
			// client holds a working refresh token whichever response it
			// keeps. The token stays used; its window does not grow, and
			// the claim keeps concurrent siblings within MaxRedemptions.
			ok, err := l.Store.ClaimRefreshSibling(ctx, tx, rt.ID, MaxRedemptions-1)
			if err != nil {
				return err
			}
			if !ok {
				return errLost
			}
		} else {
			ok, err := l.Store.MarkRefreshUsed(ctx, tx, rt.ID, next.ID, now)
			if err != nil {
				return err
			}
			if !ok {
				return errLost
			}
		}
		if err := l.Store.InsertRefreshToken(ctx, tx, next); err != nil {
			return err
		}
		rraw = raw
		if at, err = l.accessToken(ctx, tx, lg, next.ID); err != nil {
			return err
		}
		if slices.Contains(scopes, scope.OpenID) {
			idt, err = l.idToken(lg, rt.Audience(), at.Token, claims)
		}
		return err
	})
	if errors.Is(err, errLost) {
		// Rotated, revoked or out of siblings since we read it: answer as
		// for a reuse, or, rotated just now by a parallel request within
		// the grace, once more as a grace refresh.
		cur, gerr := l.Store.RefreshTokenByID(ctx, nil, rt.ID)
		if gerr != nil {
			return nil, gerr
		}
		if err := l.refusal(ctx, cur, c); err != nil {
			return nil, err
		}
		if !grace && cur.UsedAt != nil && cur.RevokedAt == nil {
			return l.Refresh(ctx, c, raw, requested)
		}
		return nil, oauth.New(oauth.InvalidGrant, "the refresh token is no longer valid")
	}
	if err != nil {
		return nil, err
	}
	if grace {
		reuses.Inc(ctx, "grace")
	}
	res := l.Minter.NewResponse(at, scopes)
	res.IDToken, res.RefreshToken = idt, rraw
	return res, nil
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// MaxRedemptions bounds the successful redemptions of one refresh token:
// its rotation and, for a confidential client within ReuseGrace, one
// sibling (a parallel refresh, or a retry after a lost response). Each
// sibling is a live refresh token of the family, so an unbounded grace
// turned one token into as many as were presented at once.
const MaxRedemptions = 2

// refusal is the invalid_grant for a revoked or used refresh token, after
// revoking the family of a reused one; nil for a live token, and for a
// used one client c may redeem once more (see MaxRedemptions). For a
// revoked token it repeats the push of the family's access tokens
// (idempotent), in case the revocation that marked it failed half-way.
func (l *Lifecycle) refusal(ctx context.Context, rt *store.RefreshToken, c *directoryv1.Client) error {
	now := l.Now()
	switch {
	case rt.RevokedAt != nil:
		if now.Sub(*rt.RevokedAt) < l.Minter.AccessTTL {
			if err := l.revokeFamily(ctx, rt.FamilyID); err != nil {
				l.logger().ErrorContext(ctx, "re-revoking a refresh token family failed", "family_id", rt.FamilyID, "err", err)
			}
		}
		return oauth.New(oauth.InvalidGrant, "the refresh token was revoked")
	case rt.UsedAt == nil:
		return nil
	case l.ReuseGrace > 0 && now.Sub(*rt.UsedAt) <= l.ReuseGrace && rt.GraceUses < MaxRedemptions-1 &&
		c.GetAuthMethod() != directoryv1.AuthMethod_AUTH_METHOD_NONE:
		// Within the grace, a sibling (see Refresh). Not for a public
		// client: nothing but the token itself proves it, so whoever
		// presents it again may be someone who copied it.
		return nil
	}
	reuses.Inc(ctx, "family_revoked")
	if err := l.revokeFamily(ctx, rt.FamilyID); err != nil {
		l.logger().ErrorContext(ctx, "revoking a reused refresh token's family failed", "family_id", rt.FamilyID, "err", err)
	} else {
		l.logger().WarnContext(ctx, "refresh token reused: its family is revoked", "family_id", rt.FamilyID, "client_id", rt.ClientID)
	}
	return oauth.New(oauth.InvalidGrant, "the refresh token was already used; every token of its login is revoked")
}

// confirmPrivileges returns c as it is now when a grant of what it may ask
// for came from another party: a user of another organization (a project
// grant) or the admin mark. Either can have been withdrawn since the code
// or refresh token was issued, and the policy applies again on a fresh
// copy of the client, not the cached one.
func (l *Lifecycle) confirmPrivileges(ctx context.Context, c *directoryv1.Client, userOrg string) (*directoryv1.Client, error) {
	if userOrg == c.GetOrgId() && !c.GetAdminClient() {
		return c, nil
	}
	fresh, err := l.Clients.Refresh(ctx, c.GetClientId())
	if errors.Is(err, clients.ErrUnknown) {
		return nil, oauth.New(oauth.InvalidGrant, "the client no longer exists")
	}
	if err != nil {
		return nil, oauth.New(oauth.TemporarilyUnavailable, "the client directory is unavailable").WithCause(err)
	}
	return fresh, nil
}

// userActive: refresh tokens of a deleted or inactive user stop working.
func (l *Lifecycle) userActive(ctx context.Context, userID string) error {
	res, err := l.Dir.GetUser(ctx, &directoryv1.GetUserRequest{UserId: userID})
	switch {
	case connect.CodeOf(err) == connect.CodeNotFound:
		return oauth.New(oauth.InvalidGrant, "the user no longer exists")
	case err != nil:
		return oauth.New(oauth.TemporarilyUnavailable, "the user directory is unavailable").WithCause(err)
	case res.GetUser().GetState() != directoryv1.UserState_USER_STATE_ACTIVE:
		return oauth.New(oauth.InvalidGrant, "the user is not active")
	}
	return nil
}

// RevokeRefreshToken revokes the refresh token raw, if it was issued to
// clientID, together with every token of its family — the refresh tokens
// rotated from the same login and the access tokens issued with them
// (seed: "that token and its corresponding access_token are revoked";
// RFC 7009 §2.1: those "based on the same authorization grant"). found is
// false for an unknown token or another client's (then nothing changes);
// a revoked or expired token of the client is found and revoked again.
// err reports a failure to make the revocation durable.
func (l *Lifecycle) RevokeRefreshToken(ctx context.Context, raw, clientID string) (found bool, err error) {
	if raw == "" || len(raw) > maxOpaqueLen || kind.Other(raw, kind.RefreshToken) {
		return false, nil
	}
	rt, err := l.Store.RefreshTokenByHash(ctx, nil, l.Hasher.TokenKey(raw))
	if errors.Is(err, store.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if rt.ClientID != clientID {
		return false, nil
	}
	return true, l.revokeFamily(ctx, rt.FamilyID)
}
