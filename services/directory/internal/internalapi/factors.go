package internalapi

import (
	"context"
	"errors"

	"connectrpc.com/connect"

	"github.com/gatehouse-id/gatehouse/pkg/db"
	directoryv1 "github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/directory/v1"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/lockout"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/users"
)

// errBadCode is the one answer for a wrong, used or replayed code and for
// an attempt the limits refuse.
var errBadCode = errors.New("invalid code")

// FactorKeys are what the factor RPCs need besides the store.
type FactorKeys struct {
	// Secrets seals and opens TOTP seeds.
	Secrets users.FactorSecrets
	// Hasher hashes recovery codes.
	Hasher users.Hasher
	// Issuer names accounts in authenticator apps (the issuer's host).
	Issuer string
	// WebAuthn is the relying party of security keys and passkeys (nil
	// on an issuer whose host is an IP address).
	WebAuthn *users.WebAuthn
}

func (s *Server) factorKeys() (FactorKeys, error) {
	if s.Factors.Secrets.Cipher == nil || s.Factors.Hasher == nil {
		return FactorKeys{}, connect.NewError(connect.CodeInternal, errors.New("internalapi: no factor keys configured"))
	}
	return s.Factors, nil
}

// human returns an active human user, NotFound otherwise (a deactivated
// one is FailedPrecondition, as at the password).
func (s *Server) human(ctx context.Context, userID string) (*users.User, error) {
	u, _, err := s.humanFor(ctx, userID, false)
	return u, err
}

// humanFor is human; with lockout, in the same read, the organization's
// opt-in account lock (0 otherwise).
func (s *Server) humanFor(ctx context.Context, userID string, lockout bool) (*users.User, int, error) {
	if userID == "" {
		return nil, 0, errNoUserID()
	}
	if lockout {
		return activeHuman(s.users.GetWithLockout(ctx, userID))
	}
	u, err := s.users.Get(ctx, userID)
	return activeHuman(u, 0, err)
}

// errNoUserID is a fresh error each time: a connect.Error carries metadata.
func errNoUserID() error {
	return connect.NewError(connect.CodeInvalidArgument, errors.New("user_id is required"))
}

// activeHuman is a read user unless it is missing, a machine or
// deactivated.
func activeHuman(u *users.User, maxFailures int, err error) (*users.User, int, error) {
	if errors.Is(err, db.ErrNotFound) {
		return nil, 0, notFound("user")
	}
	if err != nil {
		return nil, 0, internalErr(err, "get user")
	}
	if u.Type != users.TypeHuman {
		return nil, 0, notFound("user")
	}
	if u.State == users.StateInactive {
		return nil, 0, connect.NewError(connect.CodeFailedPrecondition, errors.New("user is deactivated"))
	}
	return u, maxFailures, nil
}

// ListAuthFactors lists a user's ready second factors.
func (s *Server) ListAuthFactors(ctx context.Context, req *directoryv1.ListAuthFactorsRequest) (*directoryv1.ListAuthFactorsResponse, error) {
	u, err := s.human(ctx, req.GetUserId())
	if err != nil {
		return nil, err
	}
	out, err := s.authFactors(ctx, u.ID)
	if err != nil {
		return nil, err
	}
	left, err := s.users.RecoveryCodesLeft(ctx, u.ID)
	if err != nil {
		return nil, internalErr(err, "count recovery codes")
	}
	out.RecoveryCodesLeft = int32(left)
	return out, nil
}

// authFactors lists a user's ready second factors (without the recovery
// codes: the password check needs only these, and reads them at every
// login).
func (s *Server) authFactors(ctx context.Context, userID string) (*directoryv1.ListAuthFactorsResponse, error) {
	types, err := s.users.SecondFactorTypes(ctx, userID)
	if err != nil {
		return nil, internalErr(err, "list factors")
	}
	return &directoryv1.ListAuthFactorsResponse{SecondFactors: types}, nil
}

// RefuseTOTPStepsUpTo makes CheckAuthFactor refuse TOTP codes of step
// floor and earlier ones (users.StepFloorAfter: a start after a process
// that did not close the database).
func (s *Server) RefuseTOTPStepsUpTo(floor int64) { s.userCmds.StepFloor = floor }

// CheckAuthFactor checks a TOTP or recovery code under the failed-attempt
// limits of lockout.FactorAccount.
func (s *Server) CheckAuthFactor(ctx context.Context, req *directoryv1.CheckAuthFactorRequest) (*directoryv1.CheckAuthFactorResponse, error) {
	keys, err := s.factorKeys()
	if err != nil {
		return nil, err
	}
	if req.GetType() != users.FactorOTP && req.GetType() != "recovery" {
		return nil, connect.NewError(connect.CodeInvalidArgument, errors.New(`type must be "otp" or "recovery"`))
	}
	if req.GetType() == users.FactorOTP {
		return s.checkTOTP(ctx, req, keys)
	}
	u, maxFailures, err := s.humanFor(ctx, req.GetUserId(), true)
	if err != nil {
		return nil, err
	}
	if u.OrgID != req.GetOrgId() {
		return nil, notFound("user")
	}
	a := lockout.Attempt{Account: lockout.FactorAccount(u.ID), Address: req.GetClientAddress(), MaxAccountFailures: maxFailures}
	// A recovery code is spent by an event, in its own transaction.
	if err := s.begin(ctx, a); err != nil {
		return nil, err
	}
	left, err := s.userCmds.UseRecoveryCode(ctx, u, keys.Hasher, req.GetCode())
	if errors.Is(err, users.ErrBadCode) {
		if err := s.lock.Failed(ctx, a); err != nil {
			return nil, internalErr(err, "record failure")
		}
		return nil, connect.NewError(connect.CodeUnauthenticated, errBadCode)
	}
	if err == nil {
		err = s.lock.Succeeded(ctx, a)
	}
	if err != nil {
		return nil, internalErr(err, "check factor")
	}
	s.Logger.InfoContext(ctx, "recovery code used", "user_id", u.ID, "recovery_codes_left", left)
	return &directoryv1.CheckAuthFactorResponse{RecoveryCodesLeft: int32(left), User: userProto(u)}, nil
}

// checkTOTP checks a TOTP code, on every login of a user with an
// authenticator app: one statement reads the user, its factor and the
// attempt's locks and counters, and then a right code is one statement
// that records its step only while no lock holds and forgets the
// attempt's counts (two on SQLite when there are counts), a wrong one two
// counts (lockout.Store.Guard), with no transaction around them.
func (s *Server) checkTOTP(ctx context.Context, req *directoryv1.CheckAuthFactorRequest, keys FactorKeys) (*directoryv1.CheckAuthFactorResponse, error) {
	if req.GetUserId() == "" {
		return nil, errNoUserID()
	}
	// The attempt's account lock is the organization's, read with the user.
	a := lockout.Attempt{Account: lockout.FactorAccount(req.GetUserId()), Address: req.GetClientAddress()}
	r, err := users.GetForTOTP(ctx, s.ES.DB().Relaxed(), req.GetUserId(), a, s.Now())
	u, maxFailures, err := activeHuman(r.User, r.MaxFailures, err)
	if err != nil {
		return nil, err
	}
	if u.OrgID != req.GetOrgId() {
		return nil, notFound("user")
	}
	a.MaxAccountFailures = maxFailures
	out, err := s.lock.Guard(ctx, a, r.Locked, r.Counted, s.userCmds.TOTPGuess(r.Factor, keys.Secrets, req.GetCode(), s.Now()))
	if err != nil {
		return nil, internalErr(err, "check factor")
	}
	if out != lockout.Passed {
		if out == lockout.Refused {
			// Not Lost: a right code a concurrent check recorded first
			// is a used code, not a throttled attempt.
			throttled.Inc(ctx)
		}
		return nil, connect.NewError(connect.CodeUnauthenticated, errBadCode)
	}
	return &directoryv1.CheckAuthFactorResponse{User: userProto(u)}, nil
}

// begin asks the failed-attempt limits whether a may run: a refusal is
// the one answer of a wrong code (errBadCode).
func (s *Server) begin(ctx context.Context, a lockout.Attempt) error {
	allowed, err := s.lock.Begin(ctx, a)
	if err != nil {
		return internalErr(err, "lockout")
	}
	if !allowed {
		throttled.Inc(ctx)
		return connect.NewError(connect.CodeUnauthenticated, errBadCode)
	}
	return nil
}

// factorUser returns the factor keys and the active human user userID.
func (s *Server) factorUser(ctx context.Context, userID string) (FactorKeys, *users.User, error) {
	keys, err := s.factorKeys()
	if err != nil {
		return FactorKeys{}, nil, err
	}
	u, err := s.human(ctx, userID)
	return keys, u, err
}

// StartTOTP starts a forced enrollment's TOTP registration.
func (s *Server) StartTOTP(ctx context.Context, req *directoryv1.StartTOTPRequest) (*directoryv1.StartTOTPResponse, error) {
	keys, u, err := s.factorUser(ctx, req.GetUserId())
	if err != nil {
		return nil, err
	}
	reg, err := s.userCmds.ResumeTOTP(ctx, u, keys.Secrets, keys.Issuer)
	if err != nil {
		return nil, asConnect(err, "start TOTP")
	}
	return &directoryv1.StartTOTPResponse{Uri: reg.URI, Secret: reg.Secret}, nil
}

// GenerateRecoveryCodes gives a user who just enrolled a second factor
// new recovery codes, replacing any earlier ones.
func (s *Server) GenerateRecoveryCodes(ctx context.Context, req *directoryv1.GenerateRecoveryCodesRequest) (*directoryv1.GenerateRecoveryCodesResponse, error) {
	keys, u, err := s.factorUser(ctx, req.GetUserId())
	if err != nil {
		return nil, err
	}
	codes, _, err := s.userCmds.GenerateRecoveryCodes(ctx, u.ID, u, keys.Hasher)
	if err != nil {
		return nil, asConnect(err, "generate recovery codes")
	}
	return &directoryv1.GenerateRecoveryCodesResponse{Codes: codes}, nil
}

// VerifyTOTP completes a forced enrollment's TOTP registration.
func (s *Server) VerifyTOTP(ctx context.Context, req *directoryv1.VerifyTOTPRequest) (*directoryv1.VerifyTOTPResponse, error) {
	keys, u, err := s.factorUser(ctx, req.GetUserId())
	if err != nil {
		return nil, err
	}
	if _, err := s.userCmds.VerifyTOTP(ctx, u.ID, u, keys.Secrets, req.GetCode(), s.Now()); err != nil {
		return nil, asConnect(err, "verify TOTP")
	}
	return &directoryv1.VerifyTOTPResponse{}, nil
}

// asConnect passes the commands' API errors (connect errors with their
// code) through and makes anything else Internal or Unavailable.
func asConnect(err error, what string) error {
	var ce *connect.Error
	if errors.As(err, &ce) {
		return err
	}
	return internalErr(err, what)
}
