package internalapi

import (
	"context"
	"errors"
	"strings"

	"connectrpc.com/connect"

	"github.com/gatehouse-id/gatehouse/pkg/db"
	directoryv1 "github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/directory/v1"
	"github.com/gatehouse-id/gatehouse/pkg/secrets"
	"github.com/gatehouse-id/gatehouse/pkg/telemetry"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/lockout"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/orgs"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/users"
)

// errBadCredentials is the one answer for an unknown login name, a wrong
// password and an attempt the failed-password limits refuse, so the
// response does not tell which.
var errBadCredentials = errors.New("invalid login name or password")

func badCredentials() error { return connect.NewError(connect.CodeUnauthenticated, errBadCredentials) }

// check verifies password for the user found by userID or login name in
// org, under the failed-password limits of package lockout. Every refusal
// before a correct password is the same answer after the same work: an
// unknown name, a user without a usable password, a wrong password, and an
// attempt the limits refuse, whose password is verified against the dummy
// hash (never the user's, so a correct password gets no further and the
// time tells nothing). On success it returns the user, with the failures
// of its pair reset.
func (s *Server) check(ctx context.Context, orgID, userID, login, password, addr string) (*users.User, error) {
	org, err := s.orgs.Get(ctx, orgID)
	if err != nil && !errors.Is(err, db.ErrNotFound) {
		return nil, internalErr(err, "get org")
	}
	return s.checkInOrg(ctx, orgID, org, userID, login, password, addr)
}

// checkInOrg is check with the organization read already (nil when it
// does not exist).
func (s *Server) checkInOrg(ctx context.Context, orgID string, org *orgs.Org, userID, login, password, addr string) (*users.User, error) {
	var u *users.User
	var err error
	given := login
	if userID != "" {
		u, err = s.users.GetInOrg(ctx, orgID, userID)
		given = userID
	} else {
		u, err = s.lookup(ctx, orgID, login)
	}
	if err != nil && !errors.Is(err, db.ErrNotFound) {
		return nil, internalErr(err, "find user")
	}
	a := lockout.Attempt{Account: account(orgID, org, u, given), Address: addr}
	if org != nil {
		a.MaxAccountFailures = org.LockoutAttempts
	}
	// Counts the attempt in advance (an overload refusal below stays
	// counted: the conservative side).
	allowed, err := s.lock.Begin(ctx, a)
	if err != nil {
		return nil, internalErr(err, "lockout")
	}
	if !allowed {
		throttled.Inc(ctx)
	}
	usable := u != nil && u.Type == users.TypeHuman && u.PasswordHash != ""
	hash := s.dummy
	if allowed && usable {
		hash = u.PasswordHash
	}
	ok, rehash, verr := s.verify(ctx, password, hash)
	switch {
	case errors.Is(verr, secrets.ErrBusy):
		return nil, users.Busy() // an overload, not a wrong password
	case errors.Is(verr, context.Canceled) || errors.Is(verr, context.DeadlineExceeded):
		return nil, connect.NewError(connect.CodeCanceled, verr)
	case verr != nil && hash != s.dummy:
		s.Logger.ErrorContext(ctx, "stored password hash unusable", "user_id", u.ID, "err", verr)
	}
	if !allowed {
		return nil, badCredentials()
	}
	if !usable || !ok {
		if err := s.lock.Failed(ctx, a); err != nil {
			return nil, internalErr(err, "record failure")
		}
		return nil, badCredentials()
	}
	if err := s.lock.Succeeded(ctx, a); err != nil {
		return nil, internalErr(err, "reset failures")
	}
	if rehash {
		s.rehash(ctx, u, password)
	}
	// Only now, with the right password, may the answer reveal the state.
	if u.State == users.StateInactive {
		return nil, connect.NewError(connect.CodeFailedPrecondition, errors.New("user is deactivated"))
	}
	return u, nil
}

// account names the login's failure counters: the user's when the name
// (or id) finds one, whichever of its names was typed; otherwise the name
// as typed, normalised and without the organization's primary domain, so
// an unknown name counts exactly as a user's would.
func account(orgID string, org *orgs.Org, u *users.User, given string) string {
	if u != nil {
		return lockout.UserAccount(u.ID)
	}
	name := strings.TrimSpace(given)
	if i := strings.LastIndex(name, "@"); i > 0 && org != nil && strings.EqualFold(name[i+1:], org.PrimaryDomain) {
		name = name[:i]
	}
	return lockout.NameAccount(orgID, users.NormalizeName(name))
}

// VerifyPassword checks a password at login.
func (s *Server) VerifyPassword(ctx context.Context, req *directoryv1.VerifyPasswordRequest) (*directoryv1.VerifyPasswordResponse, error) {
	m := req
	if m.GetOrgId() == "" || (m.GetUserId() == "" && m.GetLoginName() == "") {
		return nil, connect.NewError(connect.CodeInvalidArgument, errors.New("org_id and user_id or login_name are required"))
	}
	// The organization's login policy may forbid passwords (its users then
	// sign in through identity providers only). An unknown organization
	// has the default policy and no users.
	org, lp, err := s.orgs.GetWithLoginPolicy(ctx, m.GetOrgId())
	switch {
	case errors.Is(err, db.ErrNotFound):
		org, lp = nil, orgs.DefaultLoginPolicy
	case err != nil:
		return nil, internalErr(err, "get org and login policy")
	}
	if !lp.AllowUsernamePassword {
		return nil, connect.NewError(connect.CodePermissionDenied, errors.New("the organization does not allow password login"))
	}
	u, err := s.checkInOrg(ctx, m.GetOrgId(), org, m.GetUserId(), m.GetLoginName(), m.GetPassword(), m.GetClientAddress())
	if err != nil {
		return nil, err
	}
	factors, err := s.authFactors(ctx, u.ID)
	if err != nil {
		return nil, err
	}
	return &directoryv1.VerifyPasswordResponse{User: userProto(u), ChangeRequired: u.PasswordChangeRequired,
		SecondFactors: factors.GetSecondFactors(), LoginPolicy: loginPolicyProto(lp)}, nil
}

// ChangePassword changes a password after checking the current one.
func (s *Server) ChangePassword(ctx context.Context, req *directoryv1.ChangePasswordRequest) (*directoryv1.ChangePasswordResponse, error) {
	m := req
	cur, err := s.users.Get(ctx, m.GetUserId())
	if errors.Is(err, db.ErrNotFound) {
		return nil, notFound("user")
	}
	if err != nil {
		return nil, internalErr(err, "get user")
	}
	u, err := s.check(ctx, cur.OrgID, cur.ID, "", m.GetCurrentPassword(), m.GetClientAddress())
	if err != nil {
		return nil, err
	}
	if err := s.setPassword(ctx, u, m.GetNewPassword(), false); err != nil {
		return nil, err
	}
	return &directoryv1.ChangePasswordResponse{}, nil
}

// setPassword sets u's password, chosen by u, under its organization's
// policy; endSessions cuts u's access as an admin's reset does.
func (s *Server) setPassword(ctx context.Context, u *users.User, password string, endSessions bool) error {
	org, err := s.orgs.Get(ctx, u.OrgID)
	if err != nil {
		return internalErr(err, "get org")
	}
	hash, err := s.userCmds.NewPasswordHash(ctx, u.ID, password, org.PasswordPolicy)
	if err != nil {
		return asInvalid(err)
	}
	if _, err := s.userCmds.SetPassword(ctx, u.ID, u, hash, false, endSessions); err != nil {
		return asInternal(err, "set password")
	}
	return nil
}

// asInvalid keeps a connect error (e.g. the policy's InvalidArgument).
func asInvalid(err error) error {
	var ce *connect.Error
	if errors.As(err, &ce) {
		return ce
	}
	return internalErr(err, "hash password")
}

func asInternal(err error, what string) error {
	var ce *connect.Error
	if errors.As(err, &ce) {
		return ce
	}
	return internalErr(err, what)
}

// rehash stores the password under the current parameters after a login
// with an older or imported hash. A failure only costs the next login the
// old hash's price again, so it is logged, never returned.
func (s *Server) rehash(ctx context.Context, u *users.User, password string) {
	hash, err := secrets.HashPassword(ctx, password)
	if err == nil {
		err = s.userCmds.Rehash(ctx, u, hash)
	}
	if err != nil {
		s.Logger.WarnContext(ctx, "password not rehashed to the current parameters", "user_id", u.ID, "err", err)
	}
}

// throttled counts password attempts refused by the delay or the address
// limit (a guessing attack shows here first).
var throttled = telemetry.MustCounter("gatehouse.directory.logins_throttled",
	"Password attempts refused unchecked by the progressive delay, the address limit or an opted-in account lock.")
