// Package authz authenticates and authorizes management API calls: the
// Bearer access token is introspected through the tokens service (cached
// briefly, never past the token's expiry) and must carry the management
// API's audience; the target organization is the caller's own or the one in
// x-service-orgid; the caller's roles there must grant the procedure's
// permission. The Caller is put into the context for the handlers.
package authz

import (
	"context"
	"crypto/sha256"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"connectrpc.com/connect"

	tokensv1 "github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/tokens/v1"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/apierr"
)

// Audience is the management API's audience (its reserved project id).
const Audience = "gatehouse"

// OrgHeader selects the target organization.
const OrgHeader = "x-service-orgid"

// Permission is what a procedure requires.
type Permission int

// Permissions, from weakest to strongest.
const (
	AnyRole     Permission = iota + 1 // any role in the target organization
	UserManager                       // ORG_USER_MANAGER, ORG_OWNER or IAM_OWNER
	OrgOwner                          // ORG_OWNER or IAM_OWNER
	IAMOwner                          // IAM_OWNER only
)

var grants = map[Permission][]string{
	AnyRole:     {"IAM_OWNER", "ORG_OWNER", "ORG_USER_MANAGER"},
	UserManager: {"IAM_OWNER", "ORG_OWNER", "ORG_USER_MANAGER"},
	OrgOwner:    {"IAM_OWNER", "ORG_OWNER"},
	IAMOwner:    {"IAM_OWNER"},
}

// Introspector checks access tokens (the tokens service's internal API).
type Introspector interface {
	Introspect(context.Context, *connect.Request[tokensv1.IntrospectRequest]) (*connect.Response[tokensv1.IntrospectResponse], error)
}

// Directory answers the questions authorization asks of the projections.
type Directory interface {
	// UserOrg returns the organization of an active user, or an error
	// wrapping db.ErrNotFound for unknown or inactive users.
	UserOrg(ctx context.Context, userID string) (string, error)
	// OrgExists reports whether an organization exists.
	OrgExists(ctx context.Context, orgID string) (bool, error)
	// Roles returns the user's roles in the organization, IAM_OWNER included.
	Roles(ctx context.Context, userID, orgID string) ([]string, error)
}

// Caller is the authenticated principal of a management call.
type Caller struct {
	UserID    string
	UserOrgID string   // the caller's own organization
	OrgID     string   // the organization the call acts on
	Roles     []string // roles in OrgID
}

// IsIAMOwner reports whether the caller holds IAM_OWNER.
func (c *Caller) IsIAMOwner() bool { return slices.Contains(c.Roles, "IAM_OWNER") }

type ctxKey struct{}

// WithCaller returns ctx carrying c.
func WithCaller(ctx context.Context, c *Caller) context.Context {
	return context.WithValue(ctx, ctxKey{}, c)
}

// FromContext returns the call's Caller; handlers behind the interceptor
// always have one.
func FromContext(ctx context.Context) *Caller {
	c, _ := ctx.Value(ctxKey{}).(*Caller)
	return c
}

// Interceptor is the management API's authentication and authorization.
type Interceptor struct {
	intro  Introspector
	dir    Directory
	perms  map[string]Permission
	logger *slog.Logger
	now    func() time.Time
	ttl    time.Duration

	mu    sync.Mutex
	cache map[[32]byte]cached
}

type cached struct {
	userID  string
	expires time.Time
}

const maxCache = 10000

// NewInterceptor returns the interceptor. perms maps every procedure to its
// permission; a procedure missing from it is refused (fail closed).
func NewInterceptor(intro Introspector, dir Directory, perms map[string]Permission, logger *slog.Logger) *Interceptor {
	return &Interceptor{intro: intro, dir: dir, perms: perms, logger: logger, now: time.Now, ttl: 10 * time.Second, cache: map[[32]byte]cached{}}
}

var _ connect.Interceptor = (*Interceptor)(nil)

// WrapUnary implements connect.Interceptor.
func (i *Interceptor) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		if req.Spec().IsClient {
			return next(ctx, req)
		}
		caller, err := i.authorize(ctx, req.Spec().Procedure, req.Header().Get("Authorization"), req.Header().Get(OrgHeader))
		if err != nil {
			return nil, err
		}
		return next(WithCaller(ctx, caller), req)
	}
}

// WrapStreamingClient implements connect.Interceptor.
func (i *Interceptor) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return next
}

// WrapStreamingHandler implements connect.Interceptor: the management API
// has no streaming procedures, so any is refused.
func (i *Interceptor) WrapStreamingHandler(connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return func(context.Context, connect.StreamingHandlerConn) error {
		return apierr.PermissionDenied("AUTHZ-no-permission", "procedure not allowed")
	}
}

func (i *Interceptor) authorize(ctx context.Context, procedure, authz, orgHeader string) (*Caller, error) {
	perm, ok := i.perms[procedure]
	if !ok {
		return nil, apierr.PermissionDenied("AUTHZ-no-permission", "procedure not allowed")
	}
	scheme, token, _ := strings.Cut(strings.TrimSpace(authz), " ")
	token = strings.TrimSpace(token)
	if !strings.EqualFold(scheme, "Bearer") || token == "" {
		return nil, apierr.Unauthenticated("AUTHZ-no-token", "a Bearer access token is required")
	}
	userID, err := i.subject(ctx, token)
	if err != nil {
		return nil, err
	}
	userOrg, err := i.dir.UserOrg(ctx, userID)
	if err != nil {
		return nil, apierr.Unauthenticated("AUTHZ-user-inactive", "the token's user does not exist or is not active")
	}
	target := strings.TrimSpace(orgHeader)
	if target == "" {
		target = userOrg
	}
	roles, err := i.dir.Roles(ctx, userID, target)
	if err != nil {
		return nil, err
	}
	c := &Caller{UserID: userID, UserOrgID: userOrg, OrgID: target, Roles: roles}
	if target != userOrg {
		exists, err := i.dir.OrgExists(ctx, target)
		if err != nil {
			return nil, err
		}
		if !exists {
			if c.IsIAMOwner() {
				return nil, apierr.NotFound("AUTHZ-org-not-found", "organization %s not found", target)
			}
			return nil, apierr.PermissionDenied("AUTHZ-no-permission", "no permission in organization %s", target)
		}
	}
	for _, r := range roles {
		if slices.Contains(grants[perm], r) {
			return c, nil
		}
	}
	return nil, apierr.PermissionDenied("AUTHZ-no-permission", "no permission for this operation in organization %s", target)
}

// subject introspects token (or reuses a recent answer) and returns its
// user id.
func (i *Interceptor) subject(ctx context.Context, token string) (string, error) {
	key := sha256.Sum256([]byte(token))
	now := i.now()
	i.mu.Lock()
	if c, ok := i.cache[key]; ok && now.Before(c.expires) {
		i.mu.Unlock()
		return c.userID, nil
	}
	i.mu.Unlock()

	res, err := i.intro.Introspect(ctx, connect.NewRequest(&tokensv1.IntrospectRequest{Token: token, Audience: Audience}))
	if err != nil {
		i.logger.WarnContext(ctx, "token introspection failed", "err", err)
		switch connect.CodeOf(err) {
		case connect.CodeUnavailable, connect.CodeUnimplemented, connect.CodeDeadlineExceeded:
			// The tokens service is down or not yet able to introspect:
			// a dependency outage, answered 503 so clients retry.
			return "", connect.NewError(connect.CodeUnavailable, errors.New("token introspection unavailable; retry"))
		}
		return "", connect.NewError(connect.CodeInternal, errors.New("token introspection failed"))
	}
	m := res.Msg
	if !m.GetActive() || m.GetSubject() == "" || !slices.Contains(m.GetAudience(), Audience) {
		return "", apierr.Unauthenticated("AUTHZ-invalid-token", "the access token is invalid, expired, revoked or not for the management API")
	}
	expires := now.Add(i.ttl)
	if exp := m.GetExpiresAt(); exp != nil && exp.AsTime().Before(expires) {
		expires = exp.AsTime()
	}
	i.mu.Lock()
	if len(i.cache) >= maxCache {
		clear(i.cache) // bounded memory; a refill costs one introspection each
	}
	i.cache[key] = cached{userID: m.GetSubject(), expires: expires}
	i.mu.Unlock()
	return m.GetSubject(), nil
}
