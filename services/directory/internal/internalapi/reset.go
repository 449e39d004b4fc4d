package internalapi

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"time"

	"connectrpc.com/connect"

	"github.com/gatehouse-id/gatehouse/pkg/db"
	directoryv1 "github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/directory/v1"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/mail"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/users"
)

// Mail is what the self-service mails need: the outbox (nil when no mail
// can be sent) and the issuer, under which their links go.
type Mail struct {
	Outbox *mail.Outbox
	Issuer *url.URL
	// Notices mails change notices (nil: none).
	Notices users.NoticeFunc
}

// SetMail makes the server send the self-service mails and the change
// notices through m.
func (s *Server) SetMail(m Mail) {
	s.Mail = m
	s.userCmds.Notices = m.Notices
}

// resetWork bounds the resets in flight (RequestPasswordReset answers
// before its work is done); a flood beyond it is dropped and logged.
const resetWork = 32

// resetTimeout bounds one reset's work after the answer.
const resetTimeout = 30 * time.Second

// RequestPasswordReset answers at once, the same for every login name, and
// then, apart from the request, mails the named user a reset link: the
// answer's timing tells nothing of the user, an address or a throttled
// earlier message.
func (s *Server) RequestPasswordReset(ctx context.Context, req *directoryv1.RequestPasswordResetRequest) (*directoryv1.RequestPasswordResetResponse, error) {
	if s.Mail.Outbox == nil {
		return nil, connect.NewError(connect.CodeFailedPrecondition, mail.ErrUnavailable)
	}
	org, policy, err := s.orgs.GetWithLoginPolicy(ctx, req.GetOrgId())
	if errors.Is(err, db.ErrNotFound) {
		return nil, notFound("organization")
	}
	if err != nil {
		return nil, internalErr(err, "get org")
	}
	if policy.HidePasswordReset {
		return nil, connect.NewError(connect.CodeFailedPrecondition, errors.New("the login policy hides password reset"))
	}
	if len(strings.TrimSpace(req.GetLoginName())) == 0 || len(req.GetLoginName()) > 320 {
		return nil, connect.NewError(connect.CodeInvalidArgument, errors.New("login_name is required (at most 320 bytes)"))
	}
	select {
	case s.resets <- struct{}{}:
	default:
		s.Logger.WarnContext(ctx, "password reset dropped: too many in flight", "org_id", org.ID)
		return &directoryv1.RequestPasswordResetResponse{}, nil
	}
	work, cancel := context.WithTimeout(context.WithoutCancel(ctx), resetTimeout)
	go func() {
		defer func() { <-s.resets }()
		defer cancel()
		s.mailReset(work, org.ID, org.Name, req.GetLoginName(), req.GetLanguage())
	}()
	return &directoryv1.RequestPasswordResetResponse{}, nil
}

// mailReset queues the reset mail of the user login names in org, if
// there is one who may get one.
func (s *Server) mailReset(ctx context.Context, orgID, orgName, login, lang string) {
	u, err := s.lookup(ctx, orgID, login)
	if errors.Is(err, db.ErrNotFound) {
		return
	}
	if err != nil {
		s.Logger.ErrorContext(ctx, "password reset: find user", "org_id", orgID, "err", err)
		return
	}
	if u.Type != users.TypeHuman || u.Email == "" || u.State == users.StateInactive {
		return
	}
	keys, err := s.factorKeys()
	if err != nil {
		s.Logger.ErrorContext(ctx, "password reset", "err", err)
		return
	}
	m := &users.CodeMail{Sealer: s.Mail.Outbox.Sealer,
		Data:   users.MailData(u, orgName, lang),
		Issuer: s.Mail.Issuer}
	_, _, err = s.userCmds.RequestPasswordReset(ctx, u.ID, u, keys.Hasher, m, s.Now())
	var ce *connect.Error
	switch {
	case err == nil:
		s.Logger.InfoContext(ctx, "password reset mail queued", "user_id", u.ID)
		s.Mail.Outbox.Kick()
	case errors.As(err, &ce):
		// Throttled, or the user changed meanwhile: nothing to tell.
		s.Logger.InfoContext(ctx, "password reset not sent", "user_id", u.ID, "reason", ce.Message())
	default:
		s.Logger.ErrorContext(ctx, "password reset", "user_id", u.ID, "err", err)
	}
}

// resetUser is the human user of a reset link whose code is valid.
func (s *Server) resetUser(ctx context.Context, userID, code string) (*users.User, FactorKeys, error) {
	keys, u, err := s.factorUser(ctx, userID)
	if err != nil {
		return nil, keys, err
	}
	if len(code) > 64 {
		return nil, keys, connect.NewError(connect.CodeInvalidArgument, errors.New("the verification code is not valid"))
	}
	if err := s.users.CheckPasswordCode(ctx, u, keys.Hasher, code, s.Now()); err != nil {
		return nil, keys, asConnect(err, "check code")
	}
	return u, keys, nil
}

// CheckPasswordResetCode checks a reset link before its page asks for a
// password.
func (s *Server) CheckPasswordResetCode(ctx context.Context, req *directoryv1.CheckPasswordResetCodeRequest) (*directoryv1.CheckPasswordResetCodeResponse, error) {
	u, _, err := s.resetUser(ctx, req.GetUserId(), req.GetCode())
	if err != nil {
		return nil, err
	}
	return &directoryv1.CheckPasswordResetCodeResponse{User: userProto(u)}, nil
}

// ResetPassword sets the password a reset link's code allows, under the
// organization's policy, and cuts the user's access everywhere.
func (s *Server) ResetPassword(ctx context.Context, req *directoryv1.ResetPasswordRequest) (*directoryv1.ResetPasswordResponse, error) {
	u, _, err := s.resetUser(ctx, req.GetUserId(), req.GetCode())
	if err != nil {
		return nil, err
	}
	// As an admin's reset: sessions end, tokens are revoked, links made
	// by password are removed (SetPassword's endSessions).
	if err := s.setPassword(ctx, u, req.GetPassword(), true); err != nil {
		return nil, err
	}
	s.deliverCutoffs(ctx)
	s.Logger.InfoContext(ctx, "password reset by link", "user_id", u.ID)
	u, err = s.users.Get(ctx, u.ID)
	if err != nil {
		return nil, internalErr(err, "get user")
	}
	return &directoryv1.ResetPasswordResponse{User: userProto(u)}, nil
}
