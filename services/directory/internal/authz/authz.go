// Package authz authenticates and authorizes management API calls: the
// Bearer access token is introspected through the tokens service (cached
// briefly, never past the token's expiry or the user's last cut-off) and
// must carry the management API's audience; the target organization is the
// caller's own or the one in x-service-orgid; the caller's roles there must
// grant the procedure's permission (a procedure listing across
// organizations, OrgNone, checks no role: its handler shows only what the
// caller's memberships allow); and a procedure that changes a user
// (credentials, keys, secrets, state, metadata, memberships) requires the
// caller to hold every role that user holds, and one that grants roles,
// each role it grants (role dominance). Every procedure's Rule is data in
// one table (management.Rules); the Caller is put into the context for the
// handlers.
package authz

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/gatehouse-id/gatehouse/pkg/db"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/apierr"
	"github.com/gatehouse-id/gatehouse/services/tokens/accesstoken"
)

// Audience is the management API's audience (its reserved project id).
const Audience = "gatehouse"

// OrgHeader selects the target organization.
const OrgHeader = "x-service-orgid"

// zitadelOrgHeader is ZITADEL's OrgHeader, refused with a pointer to ours.
const zitadelOrgHeader = "x-zitadel-orgid"

// Permission is what a procedure requires.
type Permission int

// Permissions, from weakest to strongest.
const (
	// Authenticated: a valid token of an active user, no role. Only with
	// OrgNone (elsewhere it grants nothing): the handler itself shows only
	// what the caller's memberships allow.
	Authenticated Permission = iota + 1
	AnyRole                  // any role in the target organization
	UserManager              // ORG_USER_MANAGER, ORG_OWNER or IAM_OWNER
	OrgOwner                 // ORG_OWNER or IAM_OWNER
	IAMOwner                 // IAM_OWNER only
)

// implied lists the roles each role includes: an org owner may do all a
// user manager may, an IAM owner everything.
var implied = map[string][]string{
	// ORG_END_USER_IMPERSONATOR is implied only for granting it: its use
	// (token exchange) checks that it was granted.
	"IAM_OWNER": {"ORG_OWNER", "ORG_USER_MANAGER", "ORG_END_USER_IMPERSONATOR"},
	"ORG_OWNER": {"ORG_USER_MANAGER"},
}

// holds reports whether roles include r, directly or implied.
func holds(roles []string, r string) bool {
	for _, h := range roles {
		if h == r || slices.Contains(implied[h], r) {
			return true
		}
	}
	return false
}

var grants = map[Permission][]string{
	AnyRole:     {"IAM_OWNER", "ORG_OWNER", "ORG_USER_MANAGER"},
	UserManager: {"IAM_OWNER", "ORG_OWNER", "ORG_USER_MANAGER"},
	OrgOwner:    {"IAM_OWNER", "ORG_OWNER"},
	IAMOwner:    {"IAM_OWNER"},
}

// OrgSource is where a procedure's organization comes from.
type OrgSource string

// Organization sources.
const (
	// OrgFromHeader: x-service-orgid, else the caller's own organization.
	OrgFromHeader OrgSource = "header_or_own"
	// OrgNew: the call creates an organization; it acts on none yet.
	OrgNew OrgSource = "new"
	// OrgNone: the call acts on no single organization (it lists across
	// them); x-service-orgid is ignored, no role is checked here, and the
	// Caller has no OrgID and no Roles. The handler filters by the caller's
	// memberships.
	OrgNone OrgSource = "none"
)

// Rule is the authorization of one procedure.
type Rule struct {
	Permission Permission
	Org        OrgSource
	// TargetUser names the request field holding the id of a user the call
	// changes; the caller must dominate that user (hold every role the
	// user holds, in every organization) when the user belongs to the
	// call's organization. Empty: the call changes no existing user.
	TargetUser string
	// Members: TargetUser is a membership's user (of any organization),
	// whom the caller must dominate wherever the user is from.
	Members bool
	// OwnUsers: only an IAM owner may name a user of another organization
	// in TargetUser; anyone else gets NotFound, word for word the answer
	// for an unknown user. Making another tenant's user a member would
	// otherwise let an organization owner look users up across tenants
	// and, by dominance, shield them from their own organization's admins.
	OwnUsers bool
	// AdminApp names the request field holding the id of an app the call
	// changes. An admin client signs in every organization's users with
	// the management API's audience, so when the app (of the call's
	// organization) is one, only an IAM owner may change it: its redirect
	// URIs, secret or keys in an organization owner's hands would hand
	// them other users' management tokens.
	AdminApp string
	// GrantRoles names the request field listing roles the call grants in
	// the call's organization; the caller must hold each.
	GrantRoles string
	// Self: a caller naming itself in TargetUser needs no role (its own
	// factors, in its own organization); anyone else is checked as the
	// rest of the rule says.
	Self bool
}

// TokenChecker checks access tokens for the management API's audience
// (accesstoken.Remote).
type TokenChecker interface {
	Verify(ctx context.Context, raw string) (*accesstoken.Token, error)
}

// Principal is what authorization needs of the calling user.
type Principal struct {
	OrgID string
	// CutAt: tokens issued at or before it are revoked (an admin password
	// reset); nil when never.
	CutAt *time.Time
}

// Membership is one organization's roles of a user; OrgID "" holds the
// instance roles (IAM_OWNER).
type Membership struct {
	OrgID string
	Roles []string
}

// Directory answers the questions authorization asks of the projections.
type Directory interface {
	// Principal returns an active user's organization and cut-off, or an
	// error wrapping db.ErrNotFound for unknown or inactive users.
	Principal(ctx context.Context, userID string) (Principal, error)
	// OrgExists reports whether an organization exists.
	OrgExists(ctx context.Context, orgID string) (bool, error)
	// Roles returns the user's roles in the organization, IAM_OWNER included.
	Roles(ctx context.Context, userID, orgID string) ([]string, error)
	// UserOrg returns the organization of a user (any state), or an error
	// wrapping db.ErrNotFound.
	UserOrg(ctx context.Context, userID string) (string, error)
	// Memberships returns every role the user holds: the instance's (OrgID
	// "") and each organization's.
	Memberships(ctx context.Context, userID string) ([]Membership, error)
	// AdminApp reports whether the app of the organization is an admin
	// client (false for an app not found there).
	AdminApp(ctx context.Context, orgID, appID string) (bool, error)
	// ManagementClient reports whether a management token of the user
	// issued to clientID still counts: the machine user's own client, or
	// an app that is an admin client now (an IAM owner may have unmarked
	// it since, or removed it).
	ManagementClient(ctx context.Context, userID, clientID string) (bool, error)
}

// Caller is the authenticated principal of a management call.
type Caller struct {
	UserID    string
	UserOrgID string   // the caller's own organization
	OrgID     string   // the organization the call acts on
	Roles     []string // roles in OrgID
	// self: the call names the caller as its target user under a Self
	// rule, and was let through without a role.
	self bool
}

// IsIAMOwner reports whether the caller holds IAM_OWNER.
func (c *Caller) IsIAMOwner() bool { return slices.Contains(c.Roles, "IAM_OWNER") }

type ctxKey struct{}

type systemKey struct{}

// AsUser marks ctx for an in-process management call made by the
// directory itself on behalf of userID (applying GATEHOUSE_BOOTSTRAP_FILE
// as bootstrap-admin). The call then goes through the same rules as one
// with that user's token. A context value cannot come from a request, so
// no caller outside the process can use it.
func AsUser(ctx context.Context, userID string) context.Context {
	return context.WithValue(ctx, systemKey{}, userID)
}

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
	tokens TokenChecker
	dir    Directory
	rules  map[string]Rule
	logger *slog.Logger
	now    func() time.Time
}

// NewInterceptor returns the interceptor. rules maps every procedure to its
// Rule; a procedure missing from it is refused (fail closed).
func NewInterceptor(tokens TokenChecker, dir Directory, rules map[string]Rule, logger *slog.Logger) *Interceptor {
	return &Interceptor{tokens: tokens, dir: dir, rules: rules, logger: logger, now: time.Now}
}

var _ connect.Interceptor = (*Interceptor)(nil)

// WrapUnary implements connect.Interceptor.
func (i *Interceptor) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		if req.Spec().IsClient {
			return next(ctx, req)
		}
		if req.Header().Get(zitadelOrgHeader) != "" {
			// Running in the caller's own organization instead of the one
			// it meant would be worse than refusing.
			return nil, apierr.InvalidArgument("AUTHZ-zitadel-header", "%s is ZITADEL's header; Gatehouse's is %s", zitadelOrgHeader, OrgHeader)
		}
		msg, _ := req.Any().(proto.Message)
		caller, rule, err := i.authorize(ctx, req.Spec().Procedure, req.Header().Get("Authorization"), req.Header().Get(OrgHeader), msg)
		if err != nil {
			return nil, err
		}
		if msg != nil && !caller.self {
			if err := i.dominate(ctx, caller, rule, msg); err != nil {
				return nil, err
			}
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

func (i *Interceptor) authorize(ctx context.Context, procedure, authz, orgHeader string, msg proto.Message) (*Caller, Rule, error) {
	rule, ok := i.rules[procedure]
	if !ok {
		return nil, rule, apierr.PermissionDenied("AUTHZ-no-permission", "procedure not allowed")
	}
	var userID string
	var issuedAt time.Time
	if sys, ok := ctx.Value(systemKey{}).(string); ok && authz == "" {
		// An in-process call of the directory itself (the bootstrap
		// file), as that user; no request from outside carries it.
		userID, issuedAt = sys, i.now()
	} else {
		scheme, token, _ := strings.Cut(strings.TrimSpace(authz), " ")
		token = strings.TrimSpace(token)
		if !strings.EqualFold(scheme, "Bearer") || token == "" {
			return nil, rule, apierr.Unauthenticated("AUTHZ-no-token", "a Bearer access token is required")
		}
		t, err := i.subject(ctx, token)
		if err != nil {
			return nil, rule, err
		}
		userID, issuedAt = t.Subject, t.IssuedAt
		// Checked at every call, from the directory's own data: an admin
		// client unmarked (or removed) is refused at once on every
		// replica, with no revocation to deliver.
		switch ok, err := i.dir.ManagementClient(ctx, t.Subject, t.ClientID); {
		case err != nil:
			return nil, rule, fmt.Errorf("authz: look up the token's client: %w", err)
		case !ok:
			return nil, rule, apierr.Unauthenticated("AUTHZ-invalid-token", "the access token is invalid, expired, revoked or not for the management API")
		}
	}
	p, err := i.dir.Principal(ctx, userID)
	if errors.Is(err, db.ErrNotFound) {
		return nil, rule, apierr.Unauthenticated("AUTHZ-user-inactive", "the token's user does not exist or is not active")
	}
	if err != nil {
		// Not a verdict on the token: the directory could not answer
		// (a database outage is Unavailable, see restapi).
		return nil, rule, fmt.Errorf("authz: look up the caller: %w", err)
	}
	if p.CutAt != nil && !issuedAt.After(*p.CutAt) {
		// Issued before an admin reset the password: revoked; the tokens
		// service says so too once the revocation has reached it.
		return nil, rule, apierr.Unauthenticated("AUTHZ-invalid-token", "the access token is invalid, expired, revoked or not for the management API")
	}
	if rule.Org == OrgNone {
		// Authenticated is all it takes; a rule asking for more cannot be
		// met without an organization to hold the role in (fail closed).
		if rule.Permission != Authenticated {
			return nil, rule, apierr.PermissionDenied("AUTHZ-no-permission", "procedure not allowed")
		}
		return &Caller{UserID: userID, UserOrgID: p.OrgID}, rule, nil
	}
	target := strings.TrimSpace(orgHeader)
	if target == "" {
		target = p.OrgID
	}
	if rule.Self && target == p.OrgID && msg != nil {
		if ids := stringsField(msg, rule.TargetUser); len(ids) == 1 && ids[0] == userID {
			roles, err := i.dir.Roles(ctx, userID, target)
			if err != nil {
				return nil, rule, err
			}
			return &Caller{UserID: userID, UserOrgID: p.OrgID, OrgID: target, Roles: roles, self: true}, rule, nil
		}
	}
	roles, err := i.dir.Roles(ctx, userID, target)
	if err != nil {
		return nil, rule, err
	}
	c := &Caller{UserID: userID, UserOrgID: p.OrgID, OrgID: target, Roles: roles}
	if target != p.OrgID {
		exists, err := i.dir.OrgExists(ctx, target)
		if err != nil {
			return nil, rule, err
		}
		if !exists {
			if c.IsIAMOwner() {
				return nil, rule, apierr.NotFound("AUTHZ-org-not-found", "organization %s not found", target)
			}
			// Word for word what a caller without a role in an existing
			// organization gets: the answer must not tell which ids exist.
			return nil, rule, apierr.PermissionDenied("AUTHZ-no-permission", "no permission for this operation in organization %s", target)
		}
	}
	for _, r := range roles {
		if slices.Contains(grants[rule.Permission], r) {
			return c, rule, nil
		}
	}
	return nil, rule, apierr.PermissionDenied("AUTHZ-no-permission", "no permission for this operation in organization %s", target)
}

// errUserNotFound is OwnUsers' answer for a user of another organization
// and for an unknown one alike.
var errUserNotFound = apierr.NotFound("AUTHZ-user-not-found", "user not found")

// dominate enforces rule's role dominance on the request msg: the caller
// grants only roles it holds, changes only users whose every role it
// holds, and only IAM owners change admin clients. IAM owners dominate
// everyone.
func (i *Interceptor) dominate(ctx context.Context, c *Caller, rule Rule, msg proto.Message) error {
	if c.IsIAMOwner() {
		return nil
	}
	if ids := stringsField(msg, rule.AdminApp); len(ids) == 1 && ids[0] != "" {
		admin, err := i.dir.AdminApp(ctx, c.OrgID, ids[0])
		if err != nil {
			return err
		}
		if admin {
			return apierr.PermissionDenied("AUTHZ-admin-app", "the app is an admin client: only an IAM owner may change it")
		}
	}
	if rule.TargetUser == "" && rule.GrantRoles == "" {
		return nil
	}
	for _, r := range stringsField(msg, rule.GrantRoles) {
		if !holds(c.Roles, r) {
			return apierr.PermissionDenied("AUTHZ-role-dominance", "you cannot grant the role %s, which you do not hold", r)
		}
	}
	ids := stringsField(msg, rule.TargetUser)
	if len(ids) != 1 || ids[0] == "" {
		return nil // the handler refuses a missing id
	}
	target := ids[0]
	if rule.OwnUsers {
		org, err := i.dir.UserOrg(ctx, target)
		if errors.Is(err, db.ErrNotFound) || (err == nil && org != c.OrgID) {
			return errUserNotFound
		}
		if err != nil {
			return err
		}
	}
	if !rule.Members {
		// A user of another organization is not found by the handler.
		org, err := i.dir.UserOrg(ctx, target)
		if err != nil || org != c.OrgID {
			return nil
		}
	}
	ms, err := i.dir.Memberships(ctx, target)
	if err != nil {
		return err
	}
	for _, m := range ms {
		held := c.Roles
		if m.OrgID != c.OrgID {
			if held, err = i.dir.Roles(ctx, c.UserID, m.OrgID); err != nil {
				return err
			}
			if m.OrgID == "" {
				held = nil // instance roles: only an IAM owner holds them, handled above
			}
		}
		for _, r := range m.Roles {
			if !holds(held, r) {
				return apierr.PermissionDenied("AUTHZ-role-dominance", "the user holds a role you do not hold")
			}
		}
	}
	return nil
}

// Dominates reports whether actor holds every role target holds, in
// every organization and instance-wide (an IAM owner dominates everyone):
// the dominance calls that change a user need, for acts in the user's name
// (impersonation through token exchange).
func Dominates(ctx context.Context, dir Directory, actorID, targetID string) (bool, error) {
	inst, err := dir.Roles(ctx, actorID, "")
	if err != nil {
		return false, err
	}
	if slices.Contains(inst, "IAM_OWNER") {
		return true, nil
	}
	ms, err := dir.Memberships(ctx, targetID)
	if err != nil {
		return false, err
	}
	for _, m := range ms {
		if m.OrgID == "" {
			return false, nil // instance roles: only an IAM owner holds them
		}
		held, err := dir.Roles(ctx, actorID, m.OrgID)
		if err != nil {
			return false, err
		}
		for _, r := range m.Roles {
			if !holds(held, r) {
				return false, nil
			}
		}
	}
	return true, nil
}

// stringsField reads a string or repeated string field of msg by name.
func stringsField(msg proto.Message, name string) []string {
	if name == "" {
		return nil
	}
	m := msg.ProtoReflect()
	fd := m.Descriptor().Fields().ByName(protoreflect.Name(name))
	if fd == nil || fd.Kind() != protoreflect.StringKind {
		return nil
	}
	if fd.IsList() {
		l := m.Get(fd).List()
		out := make([]string, l.Len())
		for j := range out {
			out[j] = l.Get(j).String()
		}
		return out
	}
	return []string{m.Get(fd).String()}
}

// subject checks token and returns what it says.
func (i *Interceptor) subject(ctx context.Context, token string) (*accesstoken.Token, error) {
	t, err := i.tokens.Verify(ctx, token)
	switch {
	case errors.Is(err, accesstoken.ErrInactive):
		return nil, apierr.Unauthenticated("AUTHZ-invalid-token", "the access token is invalid, expired, revoked or not for the management API")
	case err != nil:
		// The tokens service is down: a dependency outage, answered 503
		// so clients retry, never a verdict on the token.
		i.logger.WarnContext(ctx, "token check failed", "err", err)
		return nil, connect.NewError(connect.CodeUnavailable, errors.New("token check unavailable; retry"))
	case t.JKT != "":
		// The management API checks no DPoP proof, so a DPoP-bound token
		// (RFC 9449) is refused: as a bearer token it would be worth as
		// much to whoever stole it.
		return nil, apierr.Unauthenticated("AUTHZ-dpop-bound", "the access token is DPoP-bound; the management API takes bearer tokens only")
	}
	return t, nil
}
