package internalapi

import (
	"context"
	"errors"
	"time"

	"connectrpc.com/connect"

	"github.com/gatehouse-id/gatehouse/pkg/db"
	directoryv1 "github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/directory/v1"
	"github.com/gatehouse-id/gatehouse/pkg/secrets"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/users"
)

// errBadCredentials is the one answer for an unknown login name and a wrong
// password, so the response does not tell which.
var errBadCredentials = errors.New("invalid login name or password")

func lockedErr(until time.Time) error {
	return connect.NewError(connect.CodeResourceExhausted,
		errors.New("too many failed attempts; try again after "+until.UTC().Format(time.RFC3339)))
}

// check verifies password for the user found by userID or login name in
// org, applying the per-user and per-address lockout. On success it
// returns the user, with its failures reset.
func (s *Server) check(ctx context.Context, orgID, userID, login, password, addr string) (*users.User, error) {
	addrKey := "addr:" + addr
	if addr != "" {
		until, err := s.lock.lockedUntil(ctx, addrKey)
		if err != nil {
			return nil, internalErr(err, "lockout")
		}
		if !until.IsZero() {
			return nil, lockedErr(until)
		}
	}
	var u *users.User
	var err error
	if userID != "" {
		u, err = s.users.GetInOrg(ctx, orgID, userID)
	} else {
		u, err = s.lookup(ctx, orgID, login)
	}
	if err != nil && !errors.Is(err, db.ErrNotFound) {
		return nil, internalErr(err, "find user")
	}
	if u == nil || u.Type != users.TypeHuman || u.PasswordHash == "" {
		if _, _, err := secrets.VerifyPassword(ctx, password, s.dummy); errors.Is(err, secrets.ErrBusy) { // same cost as a real check
			return nil, users.Busy()
		}
		if err := s.failAddress(ctx, addrKey, addr); err != nil {
			return nil, err
		}
		return nil, connect.NewError(connect.CodeUnauthenticated, errBadCredentials)
	}
	userKey := "user:" + u.ID
	until, err := s.lock.lockedUntil(ctx, userKey)
	if err != nil {
		return nil, internalErr(err, "lockout")
	}
	if !until.IsZero() {
		return nil, lockedErr(until)
	}
	ok, rehash, verr := secrets.VerifyPassword(ctx, password, u.PasswordHash)
	switch {
	case errors.Is(verr, secrets.ErrBusy):
		return nil, users.Busy() // an overload, not a wrong password
	case errors.Is(verr, context.Canceled) || errors.Is(verr, context.DeadlineExceeded):
		return nil, connect.NewError(connect.CodeCanceled, verr)
	case verr != nil:
		s.Logger.ErrorContext(ctx, "stored password hash unusable", "user_id", u.ID, "err", verr)
	}
	if !ok {
		org, err := s.orgs.Get(ctx, u.OrgID)
		if err != nil {
			return nil, internalErr(err, "get org")
		}
		locked, err := s.lock.fail(ctx, userKey, org.LockoutAttempts, 0, UserLockDuration)
		if err != nil {
			return nil, internalErr(err, "record failure")
		}
		if err := s.failAddress(ctx, addrKey, addr); err != nil {
			return nil, err
		}
		if locked {
			return nil, lockedErr(s.Now().Add(UserLockDuration))
		}
		return nil, connect.NewError(connect.CodeUnauthenticated, errBadCredentials)
	}
	if err := s.lock.reset(ctx, userKey); err != nil {
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

func (s *Server) failAddress(ctx context.Context, key, addr string) error {
	if addr == "" {
		return nil
	}
	locked, err := s.lock.fail(ctx, key, AddressMaxFailures, AddressWindow, AddressLockTime)
	if err != nil {
		return internalErr(err, "record failure")
	}
	if locked {
		return lockedErr(s.Now().Add(AddressLockTime))
	}
	return nil
}

// VerifyPassword checks a password at login.
func (s *Server) VerifyPassword(ctx context.Context, req *connect.Request[directoryv1.VerifyPasswordRequest]) (*connect.Response[directoryv1.VerifyPasswordResponse], error) {
	m := req.Msg
	if m.GetOrgId() == "" || (m.GetUserId() == "" && m.GetLoginName() == "") {
		return nil, connect.NewError(connect.CodeInvalidArgument, errors.New("org_id and user_id or login_name are required"))
	}
	// The organization's login policy may forbid passwords (its users then
	// sign in through identity providers only).
	if lp, err := s.orgs.LoginPolicy(ctx, m.GetOrgId()); err != nil {
		return nil, internalErr(err, "get login policy")
	} else if !lp.AllowUsernamePassword {
		return nil, connect.NewError(connect.CodePermissionDenied, errors.New("the organization does not allow password login"))
	}
	u, err := s.check(ctx, m.GetOrgId(), m.GetUserId(), m.GetLoginName(), m.GetPassword(), m.GetClientAddress())
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&directoryv1.VerifyPasswordResponse{User: userProto(u), ChangeRequired: u.PasswordChangeRequired}), nil
}

// ChangePassword changes a password after checking the current one.
func (s *Server) ChangePassword(ctx context.Context, req *connect.Request[directoryv1.ChangePasswordRequest]) (*connect.Response[directoryv1.ChangePasswordResponse], error) {
	m := req.Msg
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
	org, err := s.orgs.Get(ctx, u.OrgID)
	if err != nil {
		return nil, internalErr(err, "get org")
	}
	hash, err := s.userCmds.NewPasswordHash(ctx, u.ID, m.GetNewPassword(), org.PasswordPolicy)
	if err != nil {
		return nil, asInvalid(err)
	}
	if _, err := s.userCmds.SetPassword(ctx, u.ID, u, hash, false, false); err != nil {
		return nil, asInternal(err, "set password")
	}
	return connect.NewResponse(&directoryv1.ChangePasswordResponse{}), nil
}

// asInvalid keeps a connect error (e.g. the policy's InvalidArgument).
func asInvalid(err error) error {
	var ce *connect.Error
	if errors.As(err, &ce) {
		return ce
	}
	return connect.NewError(connect.CodeInternal, err)
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
