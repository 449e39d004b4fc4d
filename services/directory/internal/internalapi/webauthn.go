package internalapi

import (
	"context"
	"errors"

	"connectrpc.com/connect"

	directoryv1 "github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/directory/v1"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/lockout"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/users"
)

// The login's WebAuthn ceremonies: a security key or passkey as the
// second factor, a passkey alone (passwordless), and the registrations
// the login and account pages start for a signed-in user.

// maxCredential bounds a PublicKeyCredential's JSON (attestation objects
// with certificate chains run to a few KB).
const maxCredential = 64 << 10

func webAuthnType(typ string) error {
	if typ != users.FactorU2F && typ != users.FactorPasswordless {
		return connect.NewError(connect.CodeInvalidArgument, errors.New(`type must be "u2f" or "passwordless"`))
	}
	return nil
}

// StartWebAuthnLogin starts a login ceremony bound to a pending request.
func (s *Server) StartWebAuthnLogin(ctx context.Context, req *directoryv1.StartWebAuthnLoginRequest) (*directoryv1.StartWebAuthnLoginResponse, error) {
	if req.GetBinding() == "" {
		return nil, connect.NewError(connect.CodeInvalidArgument, errors.New("binding is required"))
	}
	var u *users.User
	if req.GetUserId() != "" {
		var err error
		if u, err = s.human(ctx, req.GetUserId()); err != nil {
			return nil, err
		}
	}
	opts, err := s.userCmds.BeginWebAuthnLogin(ctx, s.Factors.WebAuthn, req.GetBinding(), u)
	if err != nil {
		return nil, asConnect(err, "start WebAuthn login")
	}
	return &directoryv1.StartWebAuthnLoginResponse{Options: string(opts)}, nil
}

// CheckWebAuthnLogin checks an assertion under the failed-attempt limits:
// a second factor's count toward the user's factor lockout (as codes do);
// a passkey sign-in's, whose user is known only once it passed, toward
// the address's counters.
func (s *Server) CheckWebAuthnLogin(ctx context.Context, req *directoryv1.CheckWebAuthnLoginRequest) (*directoryv1.CheckWebAuthnLoginResponse, error) {
	if req.GetBinding() == "" || req.GetOrgId() == "" {
		return nil, connect.NewError(connect.CodeInvalidArgument, errors.New("binding and org_id are required"))
	}
	if len(req.GetCredential()) > maxCredential {
		return nil, connect.NewError(connect.CodeInvalidArgument, errors.New("credential is too large"))
	}
	a := lockout.Attempt{Account: "passkey:" + req.GetOrgId(), Address: req.GetClientAddress()}
	if req.GetUserId() != "" {
		u, maxFailures, err := s.humanFor(ctx, req.GetUserId(), true)
		if err != nil {
			return nil, err
		}
		if u.OrgID != req.GetOrgId() {
			return nil, notFound("user")
		}
		a = lockout.Attempt{Account: lockout.FactorAccount(u.ID), Address: req.GetClientAddress(), MaxAccountFailures: maxFailures}
	}
	if err := s.begin(ctx, a); err != nil {
		return nil, err
	}
	res, err := s.userCmds.FinishWebAuthnLogin(ctx, s.Factors.WebAuthn, req.GetBinding(), req.GetUserId(), []byte(req.GetCredential()))
	if errors.Is(err, users.ErrCloned) {
		s.Logger.WarnContext(ctx, "WebAuthn signature counter went back: the credential may be cloned", "user_id", req.GetUserId())
	}
	if err == nil && (res.User.OrgID != req.GetOrgId() || res.User.State == users.StateInactive || res.User.State == users.StateLocked) {
		// Another organization's passkey, or a deactivated or locked
		// user's: no sign-in here, said like any refused assertion.
		err = users.ErrBadCode
	}
	if errors.Is(err, users.ErrBadCode) || errors.Is(err, users.ErrCloned) {
		if err := s.lock.Failed(ctx, a); err != nil {
			return nil, internalErr(err, "record failure")
		}
		return nil, connect.NewError(connect.CodeUnauthenticated, errBadCode)
	}
	if err != nil {
		return nil, asConnect(err, "check WebAuthn login")
	}
	if err := s.lock.Succeeded(ctx, a); err != nil {
		return nil, internalErr(err, "reset failures")
	}
	return &directoryv1.CheckWebAuthnLoginResponse{User: userProto(res.User), FactorType: res.Factor.Type, UserVerified: res.UserVerified}, nil
}

// StartWebAuthnRegistration starts a registration for a signed-in user.
func (s *Server) StartWebAuthnRegistration(ctx context.Context, req *directoryv1.StartWebAuthnRegistrationRequest) (*directoryv1.StartWebAuthnRegistrationResponse, error) {
	if err := webAuthnType(req.GetType()); err != nil {
		return nil, err
	}
	u, err := s.human(ctx, req.GetUserId())
	if err != nil {
		return nil, err
	}
	reg, _, err := s.userCmds.StartWebAuthn(ctx, u.ID, u, s.Factors.WebAuthn, req.GetType())
	if err != nil {
		return nil, asConnect(err, "start WebAuthn registration")
	}
	return &directoryv1.StartWebAuthnRegistrationResponse{Id: reg.ID, Options: string(reg.Options)}, nil
}

// VerifyWebAuthnRegistration completes a registration.
func (s *Server) VerifyWebAuthnRegistration(ctx context.Context, req *directoryv1.VerifyWebAuthnRegistrationRequest) (*directoryv1.VerifyWebAuthnRegistrationResponse, error) {
	if err := webAuthnType(req.GetType()); err != nil {
		return nil, err
	}
	if len(req.GetCredential()) > maxCredential || len(req.GetName()) > 200 {
		return nil, connect.NewError(connect.CodeInvalidArgument, errors.New("credential or name is too large"))
	}
	u, err := s.human(ctx, req.GetUserId())
	if err != nil {
		return nil, err
	}
	if _, err := s.userCmds.VerifyWebAuthn(ctx, u.ID, u, s.Factors.WebAuthn, req.GetType(), req.GetId(), []byte(req.GetCredential()), req.GetName()); err != nil {
		return nil, asConnect(err, "verify WebAuthn registration")
	}
	return &directoryv1.VerifyWebAuthnRegistrationResponse{}, nil
}
