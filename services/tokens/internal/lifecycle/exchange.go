package lifecycle

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"time"

	"connectrpc.com/connect"

	"github.com/gatehouse-id/gatehouse/pkg/db"
	directoryv1 "github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/directory/v1"
	"github.com/gatehouse-id/gatehouse/pkg/oauth"
	"github.com/gatehouse-id/gatehouse/services/tokens/accesstoken"
	"github.com/gatehouse-id/gatehouse/services/tokens/dpop"
	"github.com/gatehouse-id/gatehouse/services/tokens/internal/kind"
	"github.com/gatehouse-id/gatehouse/services/tokens/internal/mint"
	"github.com/gatehouse-id/gatehouse/services/tokens/internal/store"
	"github.com/gatehouse-id/gatehouse/services/tokens/scope"
)

// Token type identifiers (RFC 8693 §3).
const (
	TokenTypeAccess  = "urn:ietf:params:oauth:token-type:access_token"
	TokenTypeRefresh = "urn:ietf:params:oauth:token-type:refresh_token"
	TokenTypeID      = "urn:ietf:params:oauth:token-type:id_token"
	TokenTypeJWT     = "urn:ietf:params:oauth:token-type:jwt"
)

// AccessVerifier verifies access tokens this server issued
// (accesstoken.Verifier: signature or record, expiry, revocation list).
type AccessVerifier interface {
	Verify(ctx context.Context, raw string) (*accesstoken.Token, error)
}

// ExchangeAuthorizer is the directory's decision on a token exchange, and
// its audit record (DirectoryService.AuthorizeTokenExchange).
type ExchangeAuthorizer interface {
	AuthorizeTokenExchange(context.Context, *directoryv1.AuthorizeTokenExchangeRequest) (*directoryv1.AuthorizeTokenExchangeResponse, error)
}

// ExchangeRequest is a token exchange request (RFC 8693 §2.1).
type ExchangeRequest struct {
	SubjectToken, SubjectTokenType string
	ActorToken, ActorTokenType     string
	RequestedTokenType             string
	// Targets are the audience and resource values together; nil keeps
	// the subject token's audience.
	Targets []string
	// Scopes requested; nil keeps the subject token's.
	Scopes []string
}

// presented is what a subject or actor token says, and where it hangs for
// revocation.
type presented struct {
	kind      string // TokenTypeAccess, TokenTypeRefresh or TokenTypeID
	subject   string
	clientID  string // the client it was issued to (azp of an ID token)
	scopes    []string
	audience  []string
	act       json.RawMessage
	jkt       string
	tokenID   string // an access token's id
	sessionID string
	refreshID string // the refresh token it came with, or is
	familyID  string
	authTime  time.Time
	amr       []string
	expiresAt time.Time
	// impersonator: the token came from an impersonation by this
	// machine user; depth: exchanges down from a token not exchanged.
	impersonator string
	depth        int
}

// maxExchangeTokenLen bounds a presented token before any parsing.
const maxExchangeTokenLen = 16 << 10

func badToken(which, why string) error {
	return oauth.New(oauth.InvalidRequest, "the %s is %s", which, why)
}

// Exchange implements the token exchange grant (RFC 8693) for client c,
// already authenticated and eligible: the subject token (and actor token,
// if any) must be live tokens of this server; the issued token may only
// narrow the subject token's audience and scopes. The caller's own tokens
// (issued to it) are narrowed without more ado. A subject token addressed
// to the caller (its client id or project in the audience) and an actor
// token issued to the caller give a delegated token carrying act (nested
// for chains). Without an actor, a subject token not issued to the caller
// is an impersonation, which the directory allows only where the
// subject's organization enables it, for a machine user holding
// ORG_END_USER_IMPERSONATOR and every role of the subject. Every
// exchange is recorded by the directory. Invalid or unacceptable tokens are
// invalid_request (§2.2.2); targets beyond the subject's invalid_target;
// scopes invalid_scope.
func (l *Lifecycle) Exchange(ctx context.Context, c *directoryv1.Client, req ExchangeRequest) (*mint.Response, error) {
	res, err := l.exchange(ctx, c, req)
	if e := oauth.As(err); err != nil && e.Code == oauth.InvalidGrant {
		// What the shared checks call invalid_grant (a user or client
		// gone) is an unacceptable token here (RFC 8693 §2.2.2).
		return nil, oauth.New(oauth.InvalidRequest, "%s", e.Description).WithCause(err)
	}
	return res, err
}

func (l *Lifecycle) exchange(ctx context.Context, c *directoryv1.Client, req ExchangeRequest) (*mint.Response, error) {
	if l.AccessTokens == nil || l.Exchanges == nil {
		return nil, oauth.New(oauth.ServerError, "token exchange is not configured")
	}
	requested := req.RequestedTokenType
	if requested == "" {
		requested = TokenTypeAccess
	}
	if !slices.Contains([]string{TokenTypeAccess, TokenTypeJWT, TokenTypeID, TokenTypeRefresh}, requested) {
		return nil, oauth.New(oauth.InvalidRequest, "requested_token_type %q is not supported", requested).
			WithHint("ask for %s, %s, %s or %s", TokenTypeAccess, TokenTypeJWT, TokenTypeID, TokenTypeRefresh)
	}
	if (req.ActorToken == "") != (req.ActorTokenType == "") {
		return nil, oauth.New(oauth.InvalidRequest, "actor_token and actor_token_type go together")
	}
	sub, err := l.presentedToken(ctx, "subject_token", req.SubjectToken, req.SubjectTokenType, true)
	if err != nil {
		return nil, err
	}
	if sub.jkt != "" && sub.jkt != dpop.Key(ctx) {
		return nil, badToken("subject_token", "DPoP-bound: the request must prove its key")
	}
	callerID := c.GetClientId()
	if sub.kind == TokenTypeRefresh && sub.clientID != callerID {
		return nil, badToken("subject_token", "a refresh token of another client")
	}
	if sub.depth >= store.MaxExchangeDepth {
		return nil, badToken("subject_token", "exchanged too many times over")
	}
	issuedToCaller := sub.clientID == callerID
	addressed := issuedToCaller || slices.Contains(sub.audience, callerID) ||
		(c.GetProjectId() != "" && slices.Contains(sub.audience, c.GetProjectId()))
	var (
		act           = sub.act
		actorID       string
		impersonation bool
	)
	if req.ActorToken != "" {
		actor, err := l.presentedToken(ctx, "actor_token", req.ActorToken, req.ActorTokenType, false)
		if err != nil {
			return nil, err
		}
		if actor.clientID != callerID {
			return nil, badToken("actor_token", "not issued to this client")
		}
		if actor.jkt != "" && actor.jkt != dpop.Key(ctx) {
			return nil, badToken("actor_token", "DPoP-bound: the request must prove its key")
		}
		if !addressed {
			return nil, badToken("subject_token", "neither issued nor addressed to this client")
		}
		actorID = actor.subject
		if actor.subject != sub.subject || len(sub.act) > 0 {
			if act, err = chain(actor.subject, sub.act); err != nil {
				return nil, badToken("subject_token", "carrying a malformed act claim")
			}
		}
	}
	// An impersonation: no actor and a subject token not issued to the
	// caller, or any exchange of a token an impersonation issued (the
	// right is checked again each time, so it ends with the role or the
	// policy). It yields access tokens only.
	impersonation = sub.impersonator != "" || (req.ActorToken == "" && !issuedToCaller)
	if impersonation && requested != TokenTypeAccess && requested != TokenTypeJWT {
		return nil, oauth.New(oauth.InvalidRequest, "an impersonation issues access tokens only")
	}
	if requested == TokenTypeRefresh && (!issuedToCaller || req.ActorToken != "" || sub.familyID == "") {
		return nil, oauth.New(oauth.InvalidRequest, "a refresh token is issued only for the client's own refresh token or the access tokens issued with it")
	}

	// What the issued token holds: the subject's, or less.
	scopes := sub.scopes
	if req.Scopes != nil {
		for _, s := range req.Scopes {
			if !slices.Contains(sub.scopes, s) {
				return nil, oauth.New(oauth.InvalidScope, "scope %q exceeds what the subject token holds", s)
			}
		}
		scopes = req.Scopes
	}
	held := sub.audience
	if !issuedToCaller || impersonation {
		// Acting for someone else, the caller reaches no further than it
		// could itself: its client id, its project, its organization's
		// projects.
		held = slices.DeleteFunc(slices.Clone(held), func(a string) bool {
			return a != callerID && a != c.GetProjectId() && !slices.Contains(c.GetOrgProjectIds(), a)
		})
	}
	aud, err := narrowAudience(held, req.Targets)
	if err != nil {
		return nil, err
	}
	// A reserved project scope stays only with its project in the audience.
	scopes = slices.DeleteFunc(slices.Clone(scopes), func(s string) bool {
		p := scope.Projects([]string{s})
		return len(p) == 1 && !slices.Contains(aud, p[0])
	})
	if requested == TokenTypeRefresh {
		if !slices.Contains(scopes, scope.OfflineAccess) || !slices.Contains(c.GetGrantTypes(), GrantRefreshToken) {
			return nil, oauth.New(oauth.InvalidScope, "a refresh token needs offline_access and the refresh_token grant")
		}
	} else {
		scopes = scope.Without(scopes, scope.OfflineAccess)
	}
	if requested == TokenTypeID && !slices.Contains(scopes, scope.OpenID) {
		return nil, oauth.New(oauth.InvalidScope, "an ID token needs the openid scope")
	}

	callerUser := ""
	if c.GetKind() == directoryv1.ClientKind_CLIENT_KIND_MACHINE_USER {
		callerUser = c.GetId()
	}
	auth, err := l.Exchanges.AuthorizeTokenExchange(ctx, &directoryv1.AuthorizeTokenExchangeRequest{
		ClientId: callerID, CallerUserId: callerUser, SubjectUserId: sub.subject, ActorUserId: actorID,
		Impersonation: impersonation, Audience: aud, Scopes: scopes,
		SubjectTokenType: req.SubjectTokenType, RequestedTokenType: requested,
	})
	switch connect.CodeOf(err) {
	case connect.CodeNotFound, connect.CodeFailedPrecondition:
		return nil, badToken("subject_token", "of a user who no longer exists or is not active")
	case connect.CodePermissionDenied:
		return nil, oauth.New(oauth.InvalidRequest, "the subject token was not issued to this client, and impersonation is not allowed").WithCause(err)
	}
	if err != nil {
		return nil, oauth.New(oauth.TemporarilyUnavailable, "the directory is unavailable").WithCause(err)
	}
	orgID := auth.GetOrgId()
	c, err = l.confirmPrivileges(ctx, c, orgID)
	if err != nil {
		return nil, err
	}
	r := scope.ForClient(c)
	if err := scope.Check(r, scopes); err != nil {
		return nil, err
	}
	if !scope.UserOrgAllowed(r, orgID) {
		return nil, badToken("subject_token", "of a user this client may not act for")
	}
	lg := login{client: c, subject: sub.subject, orgID: orgID, scopes: scopes, sessionID: sub.sessionID,
		authTime: sub.authTime, amr: sub.amr}
	switch requested {
	case TokenTypeID:
		return l.exchangeIDToken(ctx, lg, act, sub.expiresAt)
	case TokenTypeRefresh:
		return l.exchangeRefresh(ctx, lg, sub)
	}
	at, err := l.Minter.AccessToken(ctx, nil, mint.Access{
		ClientID: callerID, Subject: sub.subject, OrgID: orgID, Scopes: scopes, Audience: aud,
		JWT:    requested == TokenTypeJWT || jwtAccess(c),
		Record: true, SessionID: sub.sessionID, RefreshID: sub.refreshID, ParentID: sub.tokenID,
		AuthTime: sub.authTime, AMR: sub.amr, Act: act, Depth: sub.depth + 1, Impersonator: impersonator(impersonation, callerUser),
		NotAfter: sub.expiresAt, // no longer than the subject: an exchange renews nothing
	})
	if err != nil {
		return nil, err
	}
	res := l.Minter.NewResponse(at, scopes)
	res.IssuedTokenType = requested
	return res, nil
}

// impersonator is the caller recorded on an impersonation's token.
func impersonator(impersonation bool, callerUser string) string {
	if impersonation {
		return callerUser
	}
	return ""
}

// exchangeIDToken issues an ID token to the caller (token_type N_A),
// expiring no later than notAfter.
func (l *Lifecycle) exchangeIDToken(ctx context.Context, lg login, act json.RawMessage, notAfter time.Time) (*mint.Response, error) {
	claims, err := l.tokenClaims(ctx, lg.client, lg.subject, lg.scopes)
	if err != nil {
		return nil, err
	}
	if len(act) > 0 {
		if claims == nil {
			claims = map[string]any{}
		}
		claims["act"] = act
	}
	idt, err := l.Minter.IDToken(mint.ID{Subject: lg.subject, ClientID: lg.client.GetClientId(), AuthTime: lg.authTime,
		AMR: lg.amr, SessionID: lg.sessionID, Claims: claims, NotAfter: notAfter})
	if err != nil {
		return nil, err
	}
	exp := l.Now().Add(l.Minter.IDTTL)
	if notAfter.Before(exp) {
		exp = notAfter
	}
	return &mint.Response{AccessToken: idt, TokenType: "N_A", ExpiresIn: int64(time.Until(exp).Round(time.Second).Seconds()),
		Scope: strings.Join(lg.scopes, " "), IssuedTokenType: TokenTypeID}, nil
}

// exchangeRefresh issues a refresh token of the subject's own family with
// the narrowed scopes: revoking the family revokes it (token_type N_A).
func (l *Lifecycle) exchangeRefresh(ctx context.Context, lg login, sub *presented) (*mint.Response, error) {
	fam, err := l.Store.RefreshTokenByID(ctx, nil, sub.familyID)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return nil, err
	}
	if err != nil || fam.RevokedAt != nil {
		return nil, badToken("subject_token", "of a revoked login")
	}
	now := l.Now()
	lg.jkt = refreshBinding(ctx, lg.client)
	rt, raw := l.newRefresh(lg, fam.Audience(), now, fam.FamilyExpiresAt, fam.FamilyID)
	if !now.Before(rt.ExpiresAt) {
		return nil, badToken("subject_token", "of an expired login")
	}
	if err := l.Store.DB.InTx(ctx, func(tx *db.Tx) error { return l.Store.InsertRefreshToken(ctx, tx, rt) }); err != nil {
		return nil, err
	}
	return &mint.Response{AccessToken: raw, TokenType: "N_A", ExpiresIn: int64(rt.ExpiresAt.Sub(now).Round(time.Second).Seconds()),
		Scope: strings.Join(lg.scopes, " "), IssuedTokenType: TokenTypeRefresh}, nil
}

// narrowAudience returns targets when each is in held (the management
// API's audience never), else held without the management API's.
func narrowAudience(held, targets []string) ([]string, error) {
	if targets == nil {
		out := slices.DeleteFunc(slices.Clone(held), func(a string) bool { return a == scope.ManagementAudience })
		if len(out) == 0 {
			return nil, oauth.New(oauth.InvalidTarget, "the subject token holds no audience that can be exchanged")
		}
		return out, nil
	}
	var out []string
	for _, t := range targets {
		if t == "" || t == scope.ManagementAudience || !slices.Contains(held, t) {
			return nil, oauth.New(oauth.InvalidTarget, "the audience or resource %q is not one the subject token holds", t)
		}
		if !slices.Contains(out, t) {
			out = append(out, t)
		}
	}
	return out, nil
}

// chain is the act claim of a token that actor uses for a subject whose
// token carried prior (RFC 8693 §4.1: the current actor outermost).
func chain(actor string, prior json.RawMessage) (json.RawMessage, error) {
	a := map[string]any{"sub": actor}
	if len(prior) > 0 {
		var p map[string]any
		if err := json.Unmarshal(prior, &p); err != nil {
			return nil, err
		}
		a["act"] = p
	}
	return json.Marshal(a)
}

// maxActDepth bounds the nesting of act claims a presented token may
// carry.
const maxActDepth = 10

// presentedToken verifies a subject or actor token of type typ: this
// server's, live, its user not cut off.
func (l *Lifecycle) presentedToken(ctx context.Context, which, raw, typ string, subject bool) (*presented, error) {
	if raw == "" || typ == "" {
		return nil, oauth.New(oauth.InvalidRequest, "%s and %s_type are required", which, which)
	}
	if len(raw) > maxExchangeTokenLen {
		return nil, badToken(which, "too long")
	}
	jwt := strings.Count(raw, ".") == 2
	var (
		p   *presented
		err error
	)
	switch typ {
	case TokenTypeAccess:
		p, err = l.presentedAccess(ctx, which, raw)
	case TokenTypeRefresh:
		if !subject {
			return nil, badToken(which, "of a type that cannot act (a refresh token)")
		}
		p, err = l.presentedRefresh(ctx, which, raw)
	case TokenTypeID:
		p, err = l.presentedIDToken(ctx, which, raw)
	case TokenTypeJWT:
		if !jwt {
			return nil, badToken(which, "not a JWT")
		}
		if p, err = l.presentedAccess(ctx, which, raw); err != nil {
			p, err = l.presentedIDToken(ctx, which, raw)
		}
	default:
		return nil, oauth.New(oauth.InvalidRequest, "%s_type %q is not supported", which, typ)
	}
	if err != nil {
		return nil, err
	}
	if depth(p.act) >= maxActDepth {
		return nil, badToken(which, "carrying too long a chain of actors")
	}
	return p, nil
}

// depth counts the nesting of an act claim.
func depth(act json.RawMessage) int {
	return strings.Count(string(act), `"act"`) + min(len(act), 1)
}

func (l *Lifecycle) presentedAccess(ctx context.Context, which, raw string) (*presented, error) {
	t, err := l.AccessTokens.Verify(ctx, raw)
	if errors.Is(err, accesstoken.ErrInactive) {
		return nil, badToken(which, "not an active access token of this server")
	}
	if err != nil {
		return nil, oauth.New(oauth.TemporarilyUnavailable, "the %s could not be checked", which).WithCause(err)
	}
	p := &presented{kind: TokenTypeAccess, subject: t.Subject, clientID: t.ClientID, scopes: t.Scopes, audience: t.Audience,
		act: t.Act, jkt: t.JKT, amr: t.AMR, expiresAt: t.ExpiresAt, tokenID: t.ID}
	rec, err := l.Store.AccessTokenByID(ctx, t.ID)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return p, nil // a stateless JWT: nothing to hang on
	case err != nil:
		return nil, oauth.New(oauth.TemporarilyUnavailable, "the %s could not be checked", which).WithCause(err)
	}
	p.depth = rec.Depth
	if rec.Impersonator != nil {
		p.impersonator = *rec.Impersonator
	}
	if rec.SessionID != nil {
		p.sessionID = *rec.SessionID
	}
	if rec.RefreshID != nil {
		p.refreshID = *rec.RefreshID
		if rt, err := l.Store.RefreshTokenByID(ctx, nil, p.refreshID); err == nil {
			p.familyID = rt.FamilyID
		}
	}
	if rec.AuthTime != nil {
		p.authTime = *rec.AuthTime
	}
	return p, nil
}

func (l *Lifecycle) presentedRefresh(ctx context.Context, which, raw string) (*presented, error) {
	if len(raw) > maxOpaqueLen || kind.Other(raw, kind.RefreshToken) {
		return nil, badToken(which, "not an active refresh token of this server")
	}
	rt, err := l.Store.RefreshTokenByHash(ctx, nil, l.Hasher.TokenKey(raw))
	if errors.Is(err, store.ErrNotFound) {
		return nil, badToken(which, "not an active refresh token of this server")
	}
	if err != nil {
		return nil, oauth.New(oauth.TemporarilyUnavailable, "the %s could not be checked", which).WithCause(err)
	}
	now := l.Now()
	if rt.RevokedAt != nil || rt.UsedAt != nil || !now.Before(rt.ExpiresAt) || !now.Before(rt.FamilyExpiresAt) {
		return nil, badToken(which, "not an active refresh token of this server")
	}
	if err := l.userActive(ctx, rt.Subject); err != nil {
		if oauth.As(err).Code == oauth.TemporarilyUnavailable {
			return nil, err
		}
		return nil, badToken(which, "of a user who no longer exists or is not active")
	}
	return &presented{kind: TokenTypeRefresh, subject: rt.Subject, clientID: rt.ClientID, scopes: rt.Scopes(), audience: rt.Audience(),
		jkt: deref(rt.JKT), sessionID: rt.Session(), refreshID: rt.ID, familyID: rt.FamilyID, authTime: rt.AuthTime, amr: rt.AMR(),
		expiresAt: minTime(rt.ExpiresAt, rt.FamilyExpiresAt)}, nil
}

// presentedIDToken verifies one of our ID tokens: signed by a published
// key, iss ours, with sub, azp and exp, unexpired, of a session not ended
// by logout and a user not cut off since. It holds the openid scope.
func (l *Lifecycle) presentedIDToken(ctx context.Context, which, raw string) (*presented, error) {
	bad := badToken(which, "not a valid ID token of this server")
	payload, err := l.Keys.Verify(raw)
	if err != nil {
		return nil, bad
	}
	var c hintClaims
	if json.Unmarshal(payload, &c) != nil || c.Issuer != l.Issuer || c.Subject == "" || c.AZP == "" || c.Expiry == nil || c.Cnf != nil {
		return nil, bad
	}
	now := l.Now()
	exp := time.Unix(*c.Expiry, 0)
	if !now.Before(exp) {
		return nil, badToken(which, "expired")
	}
	// A user's cut-off covers the access tokens issued up to it: an ID
	// token issued then is covered as an access token of that time.
	revoked, err := l.Revoked.TokenRevoked(ctx, "", c.Subject, time.Unix(c.IssuedAt, 0).Add(l.Minter.AccessTTL))
	if err != nil {
		return nil, oauth.New(oauth.TemporarilyUnavailable, "the %s could not be checked", which).WithCause(err)
	}
	if revoked {
		return nil, badToken(which, "revoked")
	}
	// So are its actors': a deactivated actor's delegations end with it.
	for _, a := range accesstoken.Actors(c.Act) {
		revoked, err := l.Revoked.TokenRevoked(ctx, "", a, time.Unix(c.IssuedAt, 0).Add(l.Minter.AccessTTL))
		if err != nil {
			return nil, oauth.New(oauth.TemporarilyUnavailable, "the %s could not be checked", which).WithCause(err)
		}
		if revoked {
			return nil, badToken(which, "revoked")
		}
	}
	if c.SID != "" {
		ended, err := l.Store.SessionEnded(ctx, c.SID)
		if err != nil {
			return nil, oauth.New(oauth.TemporarilyUnavailable, "the %s could not be checked", which).WithCause(err)
		}
		if ended {
			return nil, badToken(which, "of a session that has ended")
		}
	}
	p := &presented{kind: TokenTypeID, subject: c.Subject, clientID: c.AZP, scopes: []string{scope.OpenID}, audience: c.Audience,
		act: c.Act, sessionID: c.SID, amr: c.AMR, expiresAt: exp}
	if c.AuthTime != nil {
		p.authTime = time.Unix(*c.AuthTime, 0).UTC()
	}
	return p, nil
}

// RevokeExchanged puts every live access token exchanged from tokenID,
// down every chain, on the revocation list.
func (l *Lifecycle) RevokeExchanged(ctx context.Context, tokenID string) error {
	live, err := l.Store.ExchangedFrom(ctx, nil, []string{tokenID}, l.Now())
	if err != nil {
		return err
	}
	return l.push(ctx, live)
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}
