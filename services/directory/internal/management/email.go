package management

import (
	"context"

	"google.golang.org/protobuf/proto"

	managementv1 "github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/management/v1"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/apierr"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/authz"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/eventstore"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/orgs"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/users"
)

// errURLTemplate refuses a url_template: links go to the issuer's pages
// only, so no code leaves for another site.
var errURLTemplate = apierr.InvalidArgument("USER-url-template", "url_template is not supported: the link goes to the issuer's login pages")

// errSelfVouch refuses a user's own address verified without a mail to
// it: marked, or with a code returned to the user instead of mailed.
var errSelfVouch = apierr.InvalidArgument("USER-self-verify",
	"a user's own address is verified only by the code mailed to it; is_verified and return_code are for user managers")

// markedBy is the proof of an address the caller marks verified: an IAM
// owner's counts everywhere, an organization admin's only within the
// organization's verified domains.
func markedBy(ctx context.Context) users.Proof {
	if authz.FromContext(ctx).IsIAMOwner() {
		return users.ProofInstance
	}
	return users.ProofOrg
}

// validEmail checks a required address at field.
func validEmail(req proto.Message, field, addr string) error {
	lim, err := apierr.CheckLimits(req)
	if err != nil {
		return err
	}
	var f apierr.Fields
	checkEmail(&f, lim, field, addr, true)
	return f.Err("USER-invalid-email")
}

// changeEmail sets u's address: verified with proof, else with a code
// mailed (m) or returned.
func (s *Server) changeEmail(ctx context.Context, u *users.User, email string, proof users.Proof, m *users.CodeMail) (string, *managementv1.ObjectDetails, error) {
	code, evs, err := s.UserCmds.ChangeEmail(ctx, authz.FromContext(ctx).UserID, u, email, proof, s.Hasher, m, s.Now())
	if err != nil {
		return "", nil, err
	}
	s.kickMail()
	return code, writeDetails(evs), nil
}

// kickMail wakes the mail worker for what the call just queued.
func (s *Server) kickMail() {
	if s.Mail != nil {
		s.Mail.Kick()
	}
}

// optionalMail is the code's message when mail can be sent, else nil
// (the call then queues none and says nothing was sent).
func (s *Server) optionalMail(ctx context.Context, u *users.User) (*users.CodeMail, error) {
	if s.Mail == nil {
		return nil, nil
	}
	return s.codeMail(ctx, u)
}

// UpdateHumanEmail changes a user's address, verified at once or with a
// verification mail.
func (s *Server) UpdateHumanEmail(ctx context.Context, req *managementv1.UpdateHumanEmailRequest) (*managementv1.UpdateHumanEmailResponse, error) {
	u, err := s.humanUser(ctx, req)
	if err != nil {
		return nil, err
	}
	if err := validEmail(req, "email", req.GetEmail()); err != nil {
		return nil, err
	}
	var proof users.Proof
	var m *users.CodeMail
	if req.GetIsEmailVerified() {
		proof = markedBy(ctx)
	} else if m, err = s.optionalMail(ctx, u); err != nil {
		return nil, err
	}
	_, details, err := s.changeEmail(ctx, u, req.GetEmail(), proof, m)
	if err != nil {
		return nil, err
	}
	return &managementv1.UpdateHumanEmailResponse{Details: details}, nil
}

// resendEmailCode gives u a new code: mailed when m is set, else returned.
func (s *Server) resendEmailCode(ctx context.Context, u *users.User, m *users.CodeMail) (string, *managementv1.ObjectDetails, error) {
	code, evs, err := s.UserCmds.ResendEmailCode(ctx, authz.FromContext(ctx).UserID, u, s.Hasher, m, s.Now())
	if err != nil {
		return "", nil, err
	}
	s.kickMail()
	return code, writeDetails(evs), nil
}

// ResendHumanEmailVerification mails a new verification code.
func (s *Server) ResendHumanEmailVerification(ctx context.Context, req *managementv1.ResendHumanEmailVerificationRequest) (*managementv1.ResendHumanEmailVerificationResponse, error) {
	u, err := s.humanUser(ctx, req)
	if err != nil {
		return nil, err
	}
	m, err := s.codeMail(ctx, u)
	if err != nil {
		return nil, err
	}
	_, details, err := s.resendEmailCode(ctx, u, m)
	if err != nil {
		return nil, err
	}
	return &managementv1.ResendHumanEmailVerificationResponse{Details: details}, nil
}

// ResendHumanInitialization mails a new invitation.
func (s *Server) ResendHumanInitialization(ctx context.Context, req *managementv1.ResendHumanInitializationRequest) (*managementv1.ResendHumanInitializationResponse, error) {
	u, err := s.humanUser(ctx, req)
	if err != nil {
		return nil, err
	}
	if req.GetEmail() != "" {
		if err := validEmail(req, "email", req.GetEmail()); err != nil {
			return nil, err
		}
	}
	m, err := s.codeMail(ctx, u)
	if err != nil {
		return nil, err
	}
	_, evs, err := s.UserCmds.Invite(ctx, authz.FromContext(ctx).UserID, u, req.GetEmail(), s.Hasher, m, s.Now())
	if err != nil {
		return nil, err
	}
	s.kickMail()
	return &managementv1.ResendHumanInitializationResponse{Details: writeDetails(evs)}, nil
}

// emailCodeMail is the message a v2 call's send_code or return_code asks
// for: nil to return the code.
func (s *Server) emailCodeMail(ctx context.Context, u *users.User, send *managementv1.SendEmailVerificationCode, ret bool) (*users.CodeMail, error) {
	if ret {
		return nil, nil
	}
	if send.GetUrlTemplate() != "" {
		return nil, errURLTemplate
	}
	return s.codeMail(ctx, u)
}

// SetEmail sets a user's address (v2): the user for itself, with a code;
// a user manager also verified at once.
func (s *Server) SetEmail(ctx context.Context, req *managementv1.SetEmailRequest) (*managementv1.SetEmailResponse, error) {
	u, err := s.humanUser(ctx, req)
	if err != nil {
		return nil, err
	}
	if err := validEmail(req, "email", req.GetEmail()); err != nil {
		return nil, err
	}
	var proof users.Proof
	var m *users.CodeMail
	switch v := req.GetVerification().(type) {
	case *managementv1.SetEmailRequest_IsVerified:
		if !v.IsVerified {
			return nil, apierr.InvalidArgument("USER-is-verified", "is_verified must be true when set")
		}
		// A user cannot vouch for its own address, not even an admin.
		if authz.FromContext(ctx).UserID == u.ID {
			return nil, errSelfVouch
		}
		proof = markedBy(ctx)
	case *managementv1.SetEmailRequest_ReturnCode:
		if authz.FromContext(ctx).UserID == u.ID {
			return nil, errSelfVouch
		}
	default:
		if m, err = s.emailCodeMail(ctx, u, req.GetSendCode(), false); err != nil {
			return nil, err
		}
	}
	code, details, err := s.changeEmail(ctx, u, req.GetEmail(), proof, m)
	if err != nil {
		return nil, err
	}
	res := &managementv1.SetEmailResponse{Details: details}
	if _, ok := req.GetVerification().(*managementv1.SetEmailRequest_ReturnCode); ok {
		res.VerificationCode = &code
	}
	return res, nil
}

// VerifyEmail verifies the user's address with its code.
func (s *Server) VerifyEmail(ctx context.Context, req *managementv1.VerifyEmailRequest) (*managementv1.VerifyEmailResponse, error) {
	u, err := s.humanUser(ctx, req)
	if err != nil {
		return nil, err
	}
	evs, err := s.UserCmds.VerifyEmail(ctx, authz.FromContext(ctx).UserID, u, s.Hasher, req.GetVerificationCode(), s.Now())
	if err != nil {
		return nil, err
	}
	return &managementv1.VerifyEmailResponse{Details: writeDetails(evs)}, nil
}

// ResendEmailCode sends, or returns, a new code (v2).
func (s *Server) ResendEmailCode(ctx context.Context, req *managementv1.ResendEmailCodeRequest) (*managementv1.ResendEmailCodeResponse, error) {
	u, err := s.humanUser(ctx, req)
	if err != nil {
		return nil, err
	}
	ret := req.GetReturnCode() != nil
	if ret && authz.FromContext(ctx).UserID == u.ID {
		return nil, errSelfVouch
	}
	m, err := s.emailCodeMail(ctx, u, req.GetSendCode(), ret)
	if err != nil {
		return nil, err
	}
	code, details, err := s.resendEmailCode(ctx, u, m)
	if err != nil {
		return nil, err
	}
	res := &managementv1.ResendEmailCodeResponse{Details: details}
	if ret {
		res.VerificationCode = &code
	}
	return res, nil
}

// addHuman creates a human user; when mail can be sent, one without a
// password gets an invitation and one with an unverified address a code
// to verify it, queued with the user. Without mail nothing is sent (and
// nothing claims to be): ResendHumanInitialization and
// ResendHumanEmailVerification then answer FailedPrecondition.
func (s *Server) addHuman(ctx context.Context, org *orgs.Org, p users.HumanAdded) (string, []eventstore.Event, error) {
	if p.EmailVerified {
		p.EmailProof = markedBy(ctx)
	}
	var m *users.CodeMail
	if s.Mail != nil {
		m = &users.CodeMail{Sealer: s.Mail.Sealer, Issuer: s.Issuer,
			Data: users.NewUserMailData(p, org.Name, org.PrimaryDomain)}
	}
	id, evs, err := s.UserCmds.AddHumanMailed(ctx, authz.FromContext(ctx).UserID, org, p, s.Hasher, m, s.Now(), false)
	if err == nil && m != nil {
		s.Mail.Kick()
	}
	return id, evs, err
}
