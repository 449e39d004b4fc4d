package internalapi

import (
	"context"
	"errors"

	"connectrpc.com/connect"

	directoryv1 "github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/directory/v1"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/mail"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/users"
)

// errBadLinkCode answers a wrong, used, expired or foreign link code.
var errBadLinkCode = connect.NewError(connect.CodeInvalidArgument, errors.New("the verification code is not valid"))

// codeUser is the human user of a link whose code of kind is valid.
func (s *Server) codeUser(ctx context.Context, userID, code string, kind directoryv1.UserCodeKind) (*users.User, FactorKeys, error) {
	keys, u, err := s.factorUser(ctx, userID)
	if err != nil {
		return nil, keys, err
	}
	if len(code) > 64 {
		return nil, keys, errBadLinkCode
	}
	switch kind {
	case directoryv1.UserCodeKind_USER_CODE_KIND_EMAIL:
		err = s.users.CheckEmailCode(ctx, u, keys.Hasher, code, s.Now())
	case directoryv1.UserCodeKind_USER_CODE_KIND_INIT:
		err = s.users.CheckInitCode(ctx, u, keys.Hasher, code, s.Now())
	default:
		return nil, keys, connect.NewError(connect.CodeInvalidArgument, errors.New("kind is required"))
	}
	if err != nil {
		return nil, keys, asConnect(err, "check code")
	}
	return u, keys, nil
}

// CheckUserCode checks a verification or invitation link before its page
// asks to confirm.
func (s *Server) CheckUserCode(ctx context.Context, req *directoryv1.CheckUserCodeRequest) (*directoryv1.CheckUserCodeResponse, error) {
	u, _, err := s.codeUser(ctx, req.GetUserId(), req.GetCode(), req.GetKind())
	if err != nil {
		return nil, err
	}
	return &directoryv1.CheckUserCodeResponse{User: userProto(u)}, nil
}

// VerifyEmailCode verifies the address a verification link was mailed to.
func (s *Server) VerifyEmailCode(ctx context.Context, req *directoryv1.VerifyEmailCodeRequest) (*directoryv1.VerifyEmailCodeResponse, error) {
	u, keys, err := s.codeUser(ctx, req.GetUserId(), req.GetCode(), directoryv1.UserCodeKind_USER_CODE_KIND_EMAIL)
	if err != nil {
		return nil, err
	}
	if _, err := s.userCmds.VerifyEmail(ctx, u.ID, u, keys.Hasher, req.GetCode(), s.Now()); err != nil {
		return nil, asInternal(err, "verify e-mail")
	}
	if u, err = s.users.Get(ctx, u.ID); err != nil {
		return nil, internalErr(err, "read user")
	}
	return &directoryv1.VerifyEmailCodeResponse{User: userProto(u)}, nil
}

// InitializeUser accepts an invitation: the first password, under the
// organization's policy, and the address proven.
func (s *Server) InitializeUser(ctx context.Context, req *directoryv1.InitializeUserRequest) (*directoryv1.InitializeUserResponse, error) {
	u, keys, err := s.codeUser(ctx, req.GetUserId(), req.GetCode(), directoryv1.UserCodeKind_USER_CODE_KIND_INIT)
	if err != nil {
		return nil, err
	}
	org, err := s.orgs.Get(ctx, u.OrgID)
	if err != nil {
		return nil, internalErr(err, "get org")
	}
	hash, err := s.userCmds.NewPasswordHash(ctx, u.ID, req.GetPassword(), org.PasswordPolicy)
	if err != nil {
		return nil, asInvalid(err)
	}
	if _, err := s.userCmds.Initialize(ctx, u, keys.Hasher, req.GetCode(), hash, s.Now()); err != nil {
		return nil, asInternal(err, "initialize user")
	}
	return &directoryv1.InitializeUserResponse{}, nil
}

// SendEmailCode mails the user a code for its unverified address (the
// login's verification step). A message of the kind within the last
// minute counts as sent.
func (s *Server) SendEmailCode(ctx context.Context, req *directoryv1.SendEmailCodeRequest) (*directoryv1.SendEmailCodeResponse, error) {
	if s.Mail.Outbox == nil {
		return nil, connect.NewError(connect.CodeFailedPrecondition, mail.ErrUnavailable)
	}
	keys, u, err := s.factorUser(ctx, req.GetUserId())
	if err != nil {
		return nil, err
	}
	org, err := s.orgs.Get(ctx, u.OrgID)
	if err != nil {
		return nil, internalErr(err, "get org")
	}
	m := &users.CodeMail{Sealer: s.Mail.Outbox.Sealer, Issuer: s.Mail.Issuer,
		Data: users.MailData(u, org.Name, req.GetLanguage())}
	_, _, err = s.userCmds.ResendEmailCode(ctx, u.ID, u, keys.Hasher, m, s.Now())
	switch {
	case errors.Is(err, users.ErrThrottled):
		return &directoryv1.SendEmailCodeResponse{}, nil
	case err != nil:
		return nil, asInternal(err, "send e-mail code")
	}
	s.Mail.Outbox.Kick()
	return &directoryv1.SendEmailCodeResponse{}, nil
}
