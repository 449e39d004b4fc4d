package management

import (
	"context"

	"google.golang.org/protobuf/proto"

	managementv1 "github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/management/v1"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/apierr"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/authz"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/eventstore"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/users"
)

// The second factors of a human user: ZITADEL's v2 user service for the
// user (and admins), its management v1 auth_factors for admins. The
// authorization table (Rules) lets a user manage its own factors; anyone
// else needs the user-manager role and to dominate the user.

// userRequest is a request naming a user by user_id.
type userRequest interface {
	proto.Message
	GetUserId() string
}

// humanUser loads the request's user (its user_id) for a call on a human
// user's credentials: a human user of the target organization.
func (s *Server) humanUser(ctx context.Context, req userRequest) (*users.User, error) {
	lim, err := apierr.CheckLimits(req) // the id's maximum length is in the proto
	if err != nil {
		return nil, err
	}
	u, err := s.user(ctx, lim, "user_id", req.GetUserId())
	if err != nil {
		return nil, err
	}
	if u.Type != users.TypeHuman {
		return nil, apierr.NotFound("USER-not-human", "human user not found")
	}
	return u, nil
}

// endsSessions: a factor removed by someone else than its user ends the
// user's sessions and revokes its tokens (see users.RemoveTOTP).
func endsSessions(ctx context.Context, u *users.User) bool {
	return authz.FromContext(ctx).UserID != u.ID
}

// RegisterTOTP starts a TOTP registration: the otpauth:// URI and the
// secret, shown to whoever sets up the authenticator app.
func (s *Server) RegisterTOTP(ctx context.Context, req *managementv1.RegisterTOTPRequest) (*managementv1.RegisterTOTPResponse, error) {
	u, err := s.humanUser(ctx, req)
	if err != nil {
		return nil, err
	}
	reg, evs, err := s.UserCmds.StartTOTP(ctx, authz.FromContext(ctx).UserID, u, s.Factors, s.Issuer.Hostname())
	if err != nil {
		return nil, err
	}
	return &managementv1.RegisterTOTPResponse{Details: writeDetails(evs), Uri: reg.URI, Secret: reg.Secret}, nil
}

// VerifyTOTPRegistration completes the registration with a code of the
// new generator; a wrong code is InvalidArgument and changes nothing.
func (s *Server) VerifyTOTPRegistration(ctx context.Context, req *managementv1.VerifyTOTPRegistrationRequest) (*managementv1.VerifyTOTPRegistrationResponse, error) {
	u, err := s.humanUser(ctx, req)
	if err != nil {
		return nil, err
	}
	evs, err := s.UserCmds.VerifyTOTP(ctx, authz.FromContext(ctx).UserID, u, s.Factors, req.GetCode(), s.Now())
	if err != nil {
		return nil, err
	}
	return &managementv1.VerifyTOTPRegistrationResponse{Details: writeDetails(evs)}, nil
}

// RemoveTOTP removes the user's TOTP generator (v2 user service).
func (s *Server) RemoveTOTP(ctx context.Context, req *managementv1.RemoveTOTPRequest) (*managementv1.RemoveTOTPResponse, error) {
	evs, err := s.removeTOTP(ctx, req)
	if err != nil {
		return nil, err
	}
	return &managementv1.RemoveTOTPResponse{Details: writeDetails(evs)}, nil
}

// RemoveHumanAuthFactorOTP removes the user's TOTP generator (management
// v1). Removing the last factor while the policy forces one is allowed:
// the user enrolls again at the next sign-in.
func (s *Server) RemoveHumanAuthFactorOTP(ctx context.Context, req *managementv1.RemoveHumanAuthFactorOTPRequest) (*managementv1.RemoveHumanAuthFactorOTPResponse, error) {
	evs, err := s.removeTOTP(ctx, req)
	if err != nil {
		return nil, err
	}
	return &managementv1.RemoveHumanAuthFactorOTPResponse{Details: writeDetails(evs)}, nil
}

func (s *Server) removeTOTP(ctx context.Context, req userRequest) ([]eventstore.Event, error) {
	u, err := s.humanUser(ctx, req)
	if err != nil {
		return nil, err
	}
	end := endsSessions(ctx, u)
	evs, err := s.UserCmds.RemoveTOTP(ctx, authz.FromContext(ctx).UserID, u, end)
	if err != nil {
		return nil, err
	}
	if end {
		s.cutAccess(ctx)
	}
	return evs, nil
}

// ListHumanAuthFactors lists the user's second factors with their state.
func (s *Server) ListHumanAuthFactors(ctx context.Context, req *managementv1.ListHumanAuthFactorsRequest) (*managementv1.ListHumanAuthFactorsResponse, error) {
	u, err := s.humanUser(ctx, req)
	if err != nil {
		return nil, err
	}
	fs, err := s.Users.Factors(ctx, u.ID)
	if err != nil {
		return nil, err
	}
	out := &managementv1.ListHumanAuthFactorsResponse{}
	for _, f := range fs {
		af := &managementv1.AuthFactor{State: managementv1.AuthFactorState(f.State)}
		switch f.Type {
		case users.FactorOTP:
			af.Type = &managementv1.AuthFactor_Otp{Otp: &managementv1.AuthFactorOTP{}}
		case users.FactorU2F:
			af.Type = &managementv1.AuthFactor_U2F{U2F: &managementv1.AuthFactorU2F{Id: f.ID, Name: f.Name}}
		default:
			continue // passkeys are listed by ListHumanPasswordless
		}
		out.Result = append(out.Result, af)
	}
	return out, nil
}
