package management

import (
	"context"

	"connectrpc.com/connect"

	managementv1 "github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/management/v1"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/apierr"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/authz"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/mail"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/users"
)

// errNoSMS refuses SMS: Gatehouse has no SMS provider.
var errNoSMS = apierr.InvalidArgument("USER-no-sms", "codes go by e-mail only (no SMS provider is configured)")

// codeMail is the message that carries a code to u, or
// FailedPrecondition when no mail can be sent.
func (s *Server) codeMail(ctx context.Context, u *users.User) (*users.CodeMail, error) {
	if s.Mail == nil {
		return nil, connect.NewError(connect.CodeFailedPrecondition, mail.ErrUnavailable)
	}
	org, err := s.org(ctx)
	if err != nil {
		return nil, err
	}
	return &users.CodeMail{Sealer: s.Mail.Sealer, Issuer: s.Issuer,
		Data: users.MailData(u, org.Name)}, nil
}

// requestReset gives u a reset code: mailed with m, else returned.
func (s *Server) requestReset(ctx context.Context, u *users.User, m *users.CodeMail) (string, *managementv1.ObjectDetails, error) {
	code, evs, err := s.UserCmds.RequestPasswordReset(ctx, authz.FromContext(ctx).UserID, u, s.Hasher, m, s.Now())
	if err != nil {
		return "", nil, err
	}
	if m != nil {
		s.kickMail()
	}
	return code, writeDetails(evs), nil
}

// SendHumanResetPasswordNotification mails the user a reset link.
func (s *Server) SendHumanResetPasswordNotification(ctx context.Context, req *managementv1.SendHumanResetPasswordNotificationRequest) (*managementv1.SendHumanResetPasswordNotificationResponse, error) {
	lim, err := apierr.CheckLimits(req)
	if err != nil {
		return nil, err
	}
	u, err := s.user(ctx, lim, "user_id", req.GetUserId())
	if err != nil {
		return nil, err
	}
	if req.GetType() != managementv1.SendHumanResetPasswordNotificationRequest_TYPE_EMAIL {
		return nil, errNoSMS
	}
	m, err := s.codeMail(ctx, u)
	if err != nil {
		return nil, err
	}
	_, details, err := s.requestReset(ctx, u, m)
	if err != nil {
		return nil, err
	}
	return &managementv1.SendHumanResetPasswordNotificationResponse{Details: details}, nil
}

// PasswordReset starts a reset: the link mailed, or the code returned.
func (s *Server) PasswordReset(ctx context.Context, req *managementv1.PasswordResetRequest) (*managementv1.PasswordResetResponse, error) {
	u, err := s.humanUser(ctx, req)
	if err != nil {
		return nil, err
	}
	var m *users.CodeMail
	if req.GetReturnCode() == nil {
		link := req.GetSendLink()
		if link.GetNotificationType() == managementv1.NotificationType_NOTIFICATION_TYPE_SMS {
			return nil, errNoSMS
		}
		if link.GetUrlTemplate() != "" {
			return nil, apierr.InvalidArgument("USER-url-template", "url_template is not supported: the link goes to the issuer's login pages")
		}
		if m, err = s.codeMail(ctx, u); err != nil {
			return nil, err
		}
	}
	code, details, err := s.requestReset(ctx, u, m)
	if err != nil {
		return nil, err
	}
	res := &managementv1.PasswordResetResponse{Details: details}
	if m == nil {
		res.VerificationCode = &code
	}
	return res, nil
}

// SetPassword sets a user's password: the user itself with its current
// password or a reset code; a user manager who dominates the user also
// without. A
// code, or someone else, ends the user's sessions and tokens.
func (s *Server) SetPassword(ctx context.Context, req *managementv1.SetPasswordRequest) (*managementv1.SetPasswordResponse, error) {
	u, err := s.humanUser(ctx, req)
	if err != nil {
		return nil, err
	}
	caller := authz.FromContext(ctx)
	self := caller.UserID == u.ID
	switch v := req.GetVerification().(type) {
	case *managementv1.SetPasswordRequest_VerificationCode:
		if err := s.Users.CheckPasswordCode(ctx, u, s.Hasher, v.VerificationCode, s.Now()); err != nil {
			return nil, err
		}
	case *managementv1.SetPasswordRequest_CurrentPassword:
		// The current password is checked under the lockout by the login
		// pages and the account page; this API does not take it.
		return nil, apierr.InvalidArgument("USER-current-password",
			"current_password is not supported here: change the password on the account page, or use a verification_code")
	default:
		// Not even an admin's own: a token alone must not replace the
		// password it was signed in with.
		if self {
			return nil, apierr.InvalidArgument("USER-verification", "setting one's own password needs a verification_code")
		}
	}
	org, err := s.org(ctx)
	if err != nil {
		return nil, err
	}
	hash, err := s.UserCmds.NewPasswordHash(ctx, u.ID, req.GetNewPassword().GetPassword(), org.PasswordPolicy)
	if err != nil {
		return nil, err
	}
	_, coded := req.GetVerification().(*managementv1.SetPasswordRequest_VerificationCode)
	endSessions := coded || !self
	evs, err := s.UserCmds.SetPassword(ctx, caller.UserID, u, hash, req.GetNewPassword().GetChangeRequired(), endSessions)
	if err != nil {
		return nil, err
	}
	if endSessions {
		s.cutAccess(ctx)
	}
	return &managementv1.SetPasswordResponse{Details: writeDetails(evs)}, nil
}
