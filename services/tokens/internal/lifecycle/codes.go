package lifecycle

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/gatehouse-id/gatehouse/pkg/db"
	directoryv1 "github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/directory/v1"
	tokensv1 "github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/tokens/v1"
	"github.com/gatehouse-id/gatehouse/pkg/oauth"
	"github.com/gatehouse-id/gatehouse/pkg/secrets"
	"github.com/gatehouse-id/gatehouse/services/tokens/dpop"
	"github.com/gatehouse-id/gatehouse/services/tokens/internal/kind"
	"github.com/gatehouse-id/gatehouse/services/tokens/internal/mint"
	"github.com/gatehouse-id/gatehouse/services/tokens/internal/store"
	"github.com/gatehouse-id/gatehouse/services/tokens/redirecturi"
	"github.com/gatehouse-id/gatehouse/services/tokens/scope"
)

// CreateAuthorizationCode implements TokenService.CreateAuthorizationCode
// (see the proto for its contract).
func (l *Lifecycle) CreateAuthorizationCode(ctx context.Context, req *tokensv1.CreateAuthorizationCodeRequest) (*tokensv1.CreateAuthorizationCodeResponse, error) {
	m := req
	c, err := l.rpcClient(ctx, m.GetClientId(), GrantAuthorizationCode)
	if err != nil {
		return nil, err
	}
	if m.GetRedirectUri() == "" || !redirecturi.Registered(c, m.GetRedirectUri()) {
		return nil, failedPrecondition("redirect_uri is not registered for the client")
	}
	lg, err := rpcLogin(c, m.GetUserId(), m.GetOrgId(), m.GetScopes(), m.GetNonce(), m.GetSessionId(), m.GetAuthTime(), m.GetAmr())
	if err != nil {
		return nil, err
	}
	challenge := m.GetCodeChallenge()
	switch {
	case challenge != "" && !ValidChallenge(challenge):
		return nil, invalidArgument("code_challenge must be an S256 challenge (43 base64url characters)")
	case challenge == "" && c.GetAuthMethod() == directoryv1.AuthMethod_AUTH_METHOD_NONE:
		return nil, invalidArgument("a code_challenge is required for a client without a secret")
	case m.GetDpopJkt() != "" && !ValidChallenge(m.GetDpopJkt()):
		return nil, invalidArgument("dpop_jkt must be a SHA-256 JWK thumbprint (43 base64url characters)")
	}
	code := kind.NewCode()
	now := l.Now()
	err = l.Store.InsertAuthCode(ctx, &store.AuthCode{
		ID:            secrets.NewTokenID(),
		CodeHash:      l.Hasher.Hash(code),
		ClientID:      c.GetClientId(),
		RedirectURI:   m.GetRedirectUri(),
		Subject:       lg.subject,
		OrgID:         lg.orgID,
		ScopesRaw:     store.EncodeScopes(lg.scopes),
		Nonce:         lg.nonce,
		CodeChallenge: challenge,
		DPoPJKT:       m.GetDpopJkt(),
		SessionID:     lg.sessionID,
		AuthTime:      lg.authTime,
		AMRRaw:        store.EncodeList(lg.amr),
		CreatedAt:     now,
		ExpiresAt:     now.Add(l.CodeTTL),
	})
	if err != nil {
		return nil, l.unavailable(ctx, err)
	}
	return &tokensv1.CreateAuthorizationCodeResponse{Code: code}, nil
}

// errLost: a concurrent request claimed the code or refresh token first.
var errLost = errors.New("claimed concurrently")

// ExchangeCode is the authorization_code grant (RFC 6749 §4.1.3, OIDC
// Core §3.1.3) for client c, already authenticated (public: by client_id
// alone, auth method none). It returns OAuth errors:
//   - invalid_grant: an unknown or expired code, one issued to another
//     client (nothing changes), a redirect_uri differing from the
//     authorization request's, a code_verifier that does not match, or a
//     code already used — which also revokes the tokens its first use
//     issued (RFC 6749 §4.1.2);
//   - invalid_request: a code_verifier missing for a code made with a
//     code_challenge, or sent for one made without (see checkPKCE).
//
// The response holds an access token (recorded, JWT or opaque per the
// client), an ID token (at_hash, nonce, sid, auth_time, amr; userinfo
// claims only with id_token_userinfo_assertion) and, when offline_access
// was granted and the client may use the refresh_token grant, a refresh
// token starting a new family.
func (l *Lifecycle) ExchangeCode(ctx context.Context, c *directoryv1.Client, public bool, code, redirectURI, verifier string) (*mint.Response, error) {
	if code == "" || len(code) > maxOpaqueLen || kind.Other(code, kind.AuthorizationCode) {
		return nil, oauth.New(oauth.InvalidGrant, "the authorization code is invalid")
	}
	ac, err := l.Store.AuthCodeByHash(ctx, nil, l.Hasher.Hash(code))
	if errors.Is(err, store.ErrNotFound) {
		return nil, oauth.New(oauth.InvalidGrant, "the authorization code is invalid")
	}
	if err != nil {
		return nil, err
	}
	if ac.ClientID != c.GetClientId() {
		return nil, oauth.New(oauth.InvalidGrant, "the authorization code was issued to another client")
	}
	if ac.UsedAt != nil {
		l.revokeReplayed(ctx, ac.ID)
		return nil, oauth.New(oauth.InvalidGrant, "the authorization code was already used")
	}
	now := l.Now()
	if !now.Before(ac.ExpiresAt) {
		return nil, oauth.New(oauth.InvalidGrant, "the authorization code has expired")
	}
	if redirectURI != ac.RedirectURI {
		return nil, oauth.New(oauth.InvalidGrant, "redirect_uri differs from the authorization request's")
	}
	if public && ac.CodeChallenge == "" {
		return nil, oauth.New(oauth.InvalidGrant, "the authorization code was issued without PKCE, which a client without a secret needs")
	}
	if err := checkPKCE(ac.CodeChallenge, verifier); err != nil {
		return nil, err
	}
	if ac.DPoPJKT != "" && ac.DPoPJKT != dpop.Key(ctx) {
		// RFC 9449 §10: the code is bound to the key the authorization
		// request named. Checked before the claim: the code stays good.
		return nil, oauth.New(oauth.InvalidGrant, "the authorization code is bound to another DPoP key: send a proof of the key named in dpop_jkt")
	}

	lg := login{subject: ac.Subject, orgID: ac.OrgID, scopes: ac.Scopes(), nonce: ac.Nonce,
		sessionID: ac.SessionID, authTime: ac.AuthTime, amr: ac.AMR()}
	res, err := l.redeem(ctx, c, lg, now, func(tx *db.Tx, accessID, familyID string) (bool, error) {
		return l.Store.ClaimAuthCode(ctx, tx, ac.ID, accessID, familyID, now)
	})
	if errors.Is(err, errLost) {
		// Used (or voided by a logout) since we read it.
		l.revokeReplayed(ctx, ac.ID)
		return nil, oauth.New(oauth.InvalidGrant, "the authorization code was already used")
	}
	return res, err
}

// redeem issues the tokens of a login that a code (an authorization code,
// an approved device authorization) grants to c: an access token, an ID
// token with openid, and a refresh token starting a new family when
// offline_access was granted and c may refresh. The privileges c had when
// the code was made are checked again (an admin mark or a project grant
// withdrawn since then stops the redemption). claim marks the code used in
// the transaction that stores the tokens, last: when it reports false (a
// concurrent redemption, or a logout that voided the code), nothing is
// stored and redeem returns errLost.
func (l *Lifecycle) redeem(ctx context.Context, c *directoryv1.Client, lg login, now time.Time,
	claim func(tx *db.Tx, accessID, familyID string) (bool, error)) (*mint.Response, error) {
	c, err := l.confirmPrivileges(ctx, c, lg.orgID)
	if err != nil {
		return nil, err
	}
	scopes := lg.scopes
	r := scope.ForClient(c)
	if scope.Check(r, scopes) != nil || !scope.UserOrgAllowed(r, lg.orgID) {
		return nil, oauth.New(oauth.InvalidGrant, "the client may no longer receive what the grant holds")
	}
	withRefresh := slices.Contains(scopes, scope.OfflineAccess) && slices.Contains(c.GetGrantTypes(), GrantRefreshToken)
	if !withRefresh {
		scopes = scope.Without(scopes, scope.OfflineAccess)
	}
	lg.client, lg.scopes, lg.jkt = c, scopes, refreshBinding(ctx, c)
	claims, err := l.tokenClaims(ctx, c, lg.subject, scopes)
	if err != nil {
		return nil, err
	}
	aud := audience(c, scopes)
	var (
		at        *mint.Issued
		idt, rraw string
	)
	err = l.Store.DB.InTx(ctx, func(tx *db.Tx) error {
		var familyID string
		if withRefresh {
			rt, raw := l.newRefresh(lg, aud, now, now.Add(l.RefreshAbs), "")
			if err := l.Store.InsertRefreshToken(ctx, tx, rt); err != nil {
				return err
			}
			familyID, rraw = rt.FamilyID, raw
		}
		// The access token belongs to the first refresh token, so revoking
		// that one (or the family) revokes it (seed, "Revoke a refresh_token").
		var err error
		if at, err = l.accessToken(ctx, tx, lg, familyID); err != nil {
			return err
		}
		if slices.Contains(scopes, scope.OpenID) {
			if idt, err = l.idToken(lg, aud, at.Token, claims); err != nil {
				return err
			}
		}
		if lg.sessionID != "" {
			// The app now holds tokens of the session: its logout reaches
			// the app (back-channel logout), if the claim below commits.
			if err := l.Store.RecordSessionClient(ctx, tx, lg.sessionID, c.GetClientId(), lg.subject, now); err != nil {
				return err
			}
		}
		ok, err := claim(tx, at.ID, familyID)
		if err != nil {
			return err
		}
		if !ok {
			return errLost
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	res := l.Minter.NewResponse(at, scopes)
	res.IDToken, res.RefreshToken = idt, rraw
	return res, nil
}

// newRefresh makes a refresh token record for lg (not yet stored) and its
// raw value. familyID "" starts a new family, named after its first token.
func (l *Lifecycle) newRefresh(lg login, idAudience []string, now, familyExpires time.Time, familyID string) (*store.RefreshToken, string) {
	raw := kind.NewRefreshToken()
	id := secrets.NewTokenID()
	if familyID == "" {
		familyID = id
	}
	exp := now.Add(l.RefreshIdle)
	if exp.After(familyExpires) {
		exp = familyExpires
	}
	rt := &store.RefreshToken{
		ID: id, TokenHash: l.Hasher.TokenKey(raw), FamilyID: familyID, ClientID: lg.client.GetClientId(),
		Subject: lg.subject, OrgID: lg.orgID, ScopesRaw: store.EncodeScopes(lg.scopes), AudRaw: store.EncodeList(idAudience),
		AuthTime: lg.authTime, AMRRaw: store.EncodeList(lg.amr), CreatedAt: now, ExpiresAt: exp, FamilyExpiresAt: familyExpires,
	}
	if lg.sessionID != "" {
		sid := lg.sessionID
		rt.SessionID = &sid
	}
	if lg.jkt != "" {
		jkt := lg.jkt
		rt.JKT = &jkt
	}
	return rt, raw
}

// revokeReplayed revokes what a replayed code's first use issued: its
// access token and its refresh token family. The replaying client gets
// invalid_grant whatever happens here, so a failure is logged; the next
// replay tries again.
func (l *Lifecycle) revokeReplayed(ctx context.Context, codeID string) {
	now := l.Now()
	var live []store.Live
	err := l.Store.DB.InTx(ctx, func(tx *db.Tx) error {
		ac, err := l.Store.AuthCodeByID(ctx, tx, codeID)
		if err != nil {
			return err
		}
		if ac.IssuedRefreshFamily != nil {
			if err := l.Store.RevokeRefreshFamily(ctx, tx, *ac.IssuedRefreshFamily, now); err != nil {
				return err
			}
			if live, err = l.Store.FamilyAccessTokens(ctx, tx, *ac.IssuedRefreshFamily, now); err != nil {
				return err
			}
		}
		if ac.IssuedAccessID != nil {
			at, err := l.Store.AccessTokenLive(ctx, tx, *ac.IssuedAccessID, now)
			if err != nil {
				return err
			}
			live = append(live, at...)
		}
		return nil
	})
	if err == nil {
		err = l.push(ctx, live)
	}
	if err != nil {
		l.logger().ErrorContext(ctx, "revoking the tokens of a replayed authorization code failed", "code_id", codeID, "err", err)
		return
	}
	l.logger().WarnContext(ctx, "authorization code replayed: its tokens are revoked", "code_id", codeID, "access_tokens", len(live))
	codeReplays.Inc(ctx)
}
