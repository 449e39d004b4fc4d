package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"connectrpc.com/connect"

	"github.com/gatehouse-id/gatehouse/pkg/db"
	directoryv1 "github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/directory/v1"
	"github.com/gatehouse-id/gatehouse/pkg/oauth"
	"github.com/gatehouse-id/gatehouse/pkg/secrets"
	"github.com/gatehouse-id/gatehouse/services/tokens/dpop"
	"github.com/gatehouse-id/gatehouse/services/tokens/internal/mint"
	"github.com/gatehouse-id/gatehouse/services/tokens/internal/store"
	"github.com/gatehouse-id/gatehouse/services/tokens/scope"
)

// Grant type names as clients register them.
const (
	GrantAuthorizationCode = "authorization_code"
	GrantImplicit          = "implicit"
	GrantRefreshToken      = "refresh_token"
)

// Directory is what this package needs of the directory's internal API.
type Directory interface {
	GetUser(context.Context, *directoryv1.GetUserRequest) (*directoryv1.GetUserResponse, error)
	GetClaims(context.Context, *directoryv1.GetClaimsRequest) (*directoryv1.GetClaimsResponse, error)
}

// Clients finds OAuth clients (clients.Cache): clients.ErrUnknown for an
// unknown client_id.
type Clients interface {
	Get(ctx context.Context, clientID string) (*directoryv1.Client, error)
	// Refresh bypasses the cache.
	Refresh(ctx context.Context, clientID string) (*directoryv1.Client, error)
}

// Revocations is the revocation list (revocation.List).
type Revocations interface {
	RevokeMany(ctx context.Context, ids []string, expiresAt []time.Time) error
	// TokenRevoked reports whether a token is revoked by its id or by a
	// cut-off of its user covering its expiry.
	TokenRevoked(ctx context.Context, tokenID, subject string, expiresAt time.Time) (bool, error)
}

// Logouts is the back-channel logout sender (backchannel.Outbox): Kick
// asks it to deliver what a revocation just queued.
type Logouts interface {
	Kick()
}

// JWS verifies a compact JWS signed by one of our published keys and
// returns its payload (keys.Manager).
type JWS interface {
	Verify(token string) ([]byte, error)
}

// Lifecycle issues, rotates and revokes the tokens of user logins. Every
// field is required.
type Lifecycle struct {
	Issuer  string
	Store   *store.Store
	Minter  *mint.Minter
	Hasher  *secrets.Hasher
	Revoked Revocations
	Keys    JWS
	Dir     Directory
	Clients Clients

	// CodeTTL is the authorization code lifetime (cfg.Tokens.AuthCodeLifetime).
	CodeTTL time.Duration
	// RefreshIdle and RefreshAbs are the refresh token's idle and absolute
	// (whole family) lifetimes.
	RefreshIdle, RefreshAbs time.Duration
	// ReuseGrace: a confidential client's rotated refresh token presented
	// again within this time gets a sibling, up to MaxRedemptions, instead
	// of revoking its family (see the package doc).
	ReuseGrace time.Duration
	// DeviceTTL and DeviceInterval are a device authorization's lifetime
	// and polling interval (0: DefaultDeviceTTL, DefaultDeviceInterval).
	DeviceTTL, DeviceInterval time.Duration

	// AccessTokens and Exchanges serve the token exchange grant (nil: it
	// answers server_error).
	AccessTokens AccessVerifier
	Exchanges    ExchangeAuthorizer
	// Logouts, if not nil, is kicked when a revocation queued back-channel
	// logouts (its periodic sweep finds them otherwise).
	Logouts Logouts

	Now    func() time.Time
	Logger *slog.Logger
}

// maxOpaqueLen bounds presented codes and refresh tokens before any
// lookup; ours are 43 characters.
const maxOpaqueLen = 100

// errUserGone: the directory no longer knows the user, or has deactivated it.
var errUserGone = errors.New("user deleted or deactivated")

// login is what an ID token and access token describe.
type login struct {
	client    *directoryv1.Client
	subject   string
	orgID     string
	scopes    []string
	nonce     string
	sessionID string
	authTime  time.Time
	amr       []string
	// jkt binds a public client's refresh tokens to its DPoP key (RFC
	// 9449 §5); "" for unbound ones.
	jkt string
}

// refreshBinding is the key a refresh token issued to c in this request
// is bound to: the proven DPoP key for a public client (a confidential
// client's refresh tokens are bound by its authentication instead).
func refreshBinding(ctx context.Context, c *directoryv1.Client) string {
	if c.GetAuthMethod() != directoryv1.AuthMethod_AUTH_METHOD_NONE {
		return ""
	}
	return dpop.Key(ctx)
}

// audience is aud of the tokens issued to c for scopes: the client_id, the
// client's project and every project a reserved scope adds.
func audience(c *directoryv1.Client, scopes []string) []string {
	return scope.Audience([]string{c.GetClientId(), c.GetProjectId()}, scopes)
}

func jwtAccess(c *directoryv1.Client) bool {
	return c.GetAccessTokenType() == directoryv1.TokenType_TOKEN_TYPE_JWT
}

// accessToken issues a recorded access token for lg (in tx q when not nil).
func (l *Lifecycle) accessToken(ctx context.Context, q db.Querier, lg login, refreshID string) (*mint.Issued, error) {
	return l.Minter.AccessToken(ctx, q, mint.Access{
		ClientID:  lg.client.GetClientId(),
		Subject:   lg.subject,
		OrgID:     lg.orgID,
		Scopes:    lg.scopes,
		Audience:  audience(lg.client, lg.scopes),
		JWT:       jwtAccess(lg.client),
		Record:    true,
		SessionID: lg.sessionID,
		RefreshID: refreshID,
		AuthTime:  lg.authTime,
		AMR:       lg.amr,
	})
}

// idToken signs the ID token of lg with aud; accessToken (if any) goes into
// at_hash, claims (if any) are the user's claims.
func (l *Lifecycle) idToken(lg login, aud []string, accessToken string, claims map[string]any) (string, error) {
	t, err := l.Minter.IDToken(mint.ID{
		Subject:     lg.subject,
		ClientID:    lg.client.GetClientId(),
		Audience:    aud,
		AuthTime:    lg.authTime,
		Nonce:       lg.nonce,
		AMR:         lg.amr,
		SessionID:   lg.sessionID,
		AccessToken: accessToken,
		Claims:      claims,
	})
	if err != nil {
		return "", fmt.Errorf("issue id token: %w", err)
	}
	return t, nil
}

// userClaims returns the user's claims for scopes (directory GetClaims):
// errUserGone when the user is deleted or deactivated.
func (l *Lifecycle) userClaims(ctx context.Context, subject string, scopes []string) (map[string]any, error) {
	res, err := l.Dir.GetClaims(ctx, &directoryv1.GetClaimsRequest{UserId: subject, Scopes: scopes})
	switch connect.CodeOf(err) {
	case connect.CodeNotFound, connect.CodeFailedPrecondition:
		return nil, errUserGone
	}
	if err != nil {
		return nil, fmt.Errorf("get user claims: %w", err)
	}
	claims := res.GetClaims().AsMap()
	delete(claims, "sub") // the ID token's own sub is authoritative
	return claims, nil
}

// tokenClaims are the userinfo claims of a token-endpoint ID token: only
// for a client with id_token_userinfo_assertion, since an access token is
// always issued beside it (seed, "Scopes").
func (l *Lifecycle) tokenClaims(ctx context.Context, c *directoryv1.Client, subject string, scopes []string) (map[string]any, error) {
	if !c.GetIdTokenUserinfoAssertion() || !slices.Contains(scopes, scope.OpenID) {
		return nil, nil
	}
	claims, err := l.userClaims(ctx, subject, scopes)
	if errors.Is(err, errUserGone) {
		return nil, oauth.New(oauth.InvalidGrant, "the user no longer exists or is deactivated")
	}
	if err != nil {
		return nil, oauth.New(oauth.TemporarilyUnavailable, "the user directory is unavailable").WithCause(err)
	}
	return claims, nil
}

// push puts live access tokens on the revocation list.
func (l *Lifecycle) push(ctx context.Context, live []store.Live) error {
	if len(live) == 0 {
		return nil
	}
	ids := make([]string, len(live))
	exp := make([]time.Time, len(live))
	for i, t := range live {
		ids[i], exp[i] = t.ID, t.ExpiresAt
	}
	if err := l.Revoked.RevokeMany(ctx, ids, exp); err != nil {
		return fmt.Errorf("revoke %d access tokens: %w", len(ids), err)
	}
	return nil
}

// revokeFamily revokes every refresh token of a family and the access
// tokens issued with them.
func (l *Lifecycle) revokeFamily(ctx context.Context, familyID string) error {
	now := l.Now()
	var live []store.Live
	err := l.Store.DB.InTx(ctx, func(tx *db.Tx) error {
		if err := l.Store.RevokeRefreshFamily(ctx, tx, familyID, now); err != nil {
			return err
		}
		var err error
		live, err = l.Store.FamilyAccessTokens(ctx, tx, familyID, now)
		return err
	})
	if err != nil {
		return err
	}
	return l.push(ctx, live)
}

// kickLogouts asks the sender to deliver queued back-channel logouts.
func (l *Lifecycle) kickLogouts(queued int64) {
	if queued > 0 && l.Logouts != nil {
		l.Logouts.Kick()
	}
}

func (l *Lifecycle) logger() *slog.Logger {
	if l.Logger == nil {
		return slog.Default()
	}
	return l.Logger
}

// CodeGrace is how long an authorization code is kept past its expiry,
// so that a late replay still revokes the access token its first use
// issued: an access token lifetime.
func (l *Lifecycle) CodeGrace() time.Duration { return l.Minter.AccessTTL }
