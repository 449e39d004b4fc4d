package management

import (
	"context"
	"strings"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	managementv1 "github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/management/v1"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/apierr"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/authz"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/eventstore"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/users"
)

// Security keys (ZITADEL's "u2f") and passkeys ("passwordless"): the v2
// user service's register/verify/list/remove calls for the user (and
// admins), management v1's list and remove for admins. Authorization as
// for TOTP (Rules).

// startWebAuthn starts a registration of typ for the request's user on
// domain (empty, or the RP ID).
func (s *Server) startWebAuthn(ctx context.Context, req userRequest, typ, domain string) (users.WebAuthnRegistration, *structpb.Struct, []eventstore.Event, error) {
	u, err := s.humanUser(ctx, req)
	if err != nil {
		return users.WebAuthnRegistration{}, nil, nil, err
	}
	if domain != "" && s.WebAuthn.RPID() != "" && !strings.EqualFold(domain, s.WebAuthn.RPID()) {
		return users.WebAuthnRegistration{}, nil, nil, apierr.InvalidArgument("USER-webauthn-domain",
			"domain must be the issuer's host %q: WebAuthn credentials are bound to it", s.WebAuthn.RPID())
	}
	reg, evs, err := s.UserCmds.StartWebAuthn(ctx, authz.FromContext(ctx).UserID, u, s.WebAuthn, typ)
	if err != nil {
		return users.WebAuthnRegistration{}, nil, nil, err
	}
	opts := &structpb.Struct{}
	if err := protojson.Unmarshal(reg.Options, opts); err != nil {
		return users.WebAuthnRegistration{}, nil, nil, err
	}
	return reg, opts, evs, nil
}

// verifyWebAuthn completes registration id of typ with the credential.
func (s *Server) verifyWebAuthn(ctx context.Context, req userRequest, typ, id string, credential *structpb.Struct, name string) ([]eventstore.Event, error) {
	u, err := s.humanUser(ctx, req)
	if err != nil {
		return nil, err
	}
	raw, err := protojson.Marshal(credential)
	if err != nil {
		return nil, apierr.InvalidArgument("USER-webauthn-invalid", "public_key_credential is not valid JSON")
	}
	return s.UserCmds.VerifyWebAuthn(ctx, authz.FromContext(ctx).UserID, u, s.WebAuthn, typ, id, raw, name)
}

// removeWebAuthn removes the user's factor id of typ; removed by someone
// else than the user, it ends the user's sessions (see endsSessions).
func (s *Server) removeWebAuthn(ctx context.Context, req userRequest, typ, id string) ([]eventstore.Event, error) {
	u, err := s.humanUser(ctx, req)
	if err != nil {
		return nil, err
	}
	end := endsSessions(ctx, u)
	evs, err := s.UserCmds.RemoveWebAuthn(ctx, authz.FromContext(ctx).UserID, u, typ, id, end)
	if err != nil {
		return nil, err
	}
	if end {
		s.cutAccess(ctx)
	}
	return evs, nil
}

// passkeys lists the user's passkeys, ready or not, oldest first, and the
// user they were read at.
func (s *Server) passkeys(ctx context.Context, req userRequest) ([]users.Factor, *users.User, error) {
	u, err := s.humanUser(ctx, req)
	if err != nil {
		return nil, nil, err
	}
	fs, err := s.Users.Factors(ctx, u.ID)
	if err != nil {
		return nil, nil, err
	}
	var out []users.Factor
	for _, f := range fs {
		if f.Type == users.FactorPasswordless {
			out = append(out, f)
		}
	}
	return out, u, nil
}

// RegisterU2F starts registering a security key.
func (s *Server) RegisterU2F(ctx context.Context, req *managementv1.RegisterU2FRequest) (*managementv1.RegisterU2FResponse, error) {
	reg, opts, evs, err := s.startWebAuthn(ctx, req, users.FactorU2F, req.GetDomain())
	if err != nil {
		return nil, err
	}
	return &managementv1.RegisterU2FResponse{Details: writeDetails(evs), U2FId: reg.ID, PublicKeyCredentialCreationOptions: opts}, nil
}

// VerifyU2FRegistration completes a security key's registration.
func (s *Server) VerifyU2FRegistration(ctx context.Context, req *managementv1.VerifyU2FRegistrationRequest) (*managementv1.VerifyU2FRegistrationResponse, error) {
	evs, err := s.verifyWebAuthn(ctx, req, users.FactorU2F, req.GetU2FId(), req.GetPublicKeyCredential(), req.GetTokenName())
	if err != nil {
		return nil, err
	}
	return &managementv1.VerifyU2FRegistrationResponse{Details: writeDetails(evs)}, nil
}

// RemoveU2F removes a security key (v2 user service).
func (s *Server) RemoveU2F(ctx context.Context, req *managementv1.RemoveU2FRequest) (*managementv1.RemoveU2FResponse, error) {
	evs, err := s.removeWebAuthn(ctx, req, users.FactorU2F, req.GetU2FId())
	if err != nil {
		return nil, err
	}
	return &managementv1.RemoveU2FResponse{Details: writeDetails(evs)}, nil
}

// RemoveHumanAuthFactorU2F removes a security key (management v1).
func (s *Server) RemoveHumanAuthFactorU2F(ctx context.Context, req *managementv1.RemoveHumanAuthFactorU2FRequest) (*managementv1.RemoveHumanAuthFactorU2FResponse, error) {
	evs, err := s.removeWebAuthn(ctx, req, users.FactorU2F, req.GetTokenId())
	if err != nil {
		return nil, err
	}
	return &managementv1.RemoveHumanAuthFactorU2FResponse{Details: writeDetails(evs)}, nil
}

// RegisterPasskey starts registering a passkey.
func (s *Server) RegisterPasskey(ctx context.Context, req *managementv1.RegisterPasskeyRequest) (*managementv1.RegisterPasskeyResponse, error) {
	reg, opts, evs, err := s.startWebAuthn(ctx, req, users.FactorPasswordless, req.GetDomain())
	if err != nil {
		return nil, err
	}
	return &managementv1.RegisterPasskeyResponse{Details: writeDetails(evs), PasskeyId: reg.ID, PublicKeyCredentialCreationOptions: opts}, nil
}

// VerifyPasskeyRegistration completes a passkey's registration.
func (s *Server) VerifyPasskeyRegistration(ctx context.Context, req *managementv1.VerifyPasskeyRegistrationRequest) (*managementv1.VerifyPasskeyRegistrationResponse, error) {
	evs, err := s.verifyWebAuthn(ctx, req, users.FactorPasswordless, req.GetPasskeyId(), req.GetPublicKeyCredential(), req.GetPasskeyName())
	if err != nil {
		return nil, err
	}
	return &managementv1.VerifyPasskeyRegistrationResponse{Details: writeDetails(evs)}, nil
}

// ListPasskeys lists the user's passkeys (v2 user service).
func (s *Server) ListPasskeys(ctx context.Context, req *managementv1.ListPasskeysRequest) (*managementv1.ListPasskeysResponse, error) {
	fs, u, err := s.passkeys(ctx, req)
	if err != nil {
		return nil, err
	}
	out := &managementv1.ListPasskeysResponse{Details: &managementv1.ListDetails{TotalResult: uint64(len(fs)),
		ProcessedSequence: u.Sequence, ViewTimestamp: timestamppb.New(u.ChangeDate)}}
	for _, f := range fs {
		out.Result = append(out.Result, &managementv1.Passkey{Id: f.ID, State: managementv1.AuthFactorState(f.State), Name: f.Name})
	}
	return out, nil
}

// ListHumanPasswordless lists the user's passkeys (management v1).
func (s *Server) ListHumanPasswordless(ctx context.Context, req *managementv1.ListHumanPasswordlessRequest) (*managementv1.ListHumanPasswordlessResponse, error) {
	fs, _, err := s.passkeys(ctx, req)
	if err != nil {
		return nil, err
	}
	out := &managementv1.ListHumanPasswordlessResponse{}
	for _, f := range fs {
		out.Result = append(out.Result, &managementv1.WebAuthNToken{Id: f.ID, State: managementv1.AuthFactorState(f.State), Name: f.Name})
	}
	return out, nil
}

// RemovePasskey removes a passkey (v2 user service).
func (s *Server) RemovePasskey(ctx context.Context, req *managementv1.RemovePasskeyRequest) (*managementv1.RemovePasskeyResponse, error) {
	evs, err := s.removeWebAuthn(ctx, req, users.FactorPasswordless, req.GetPasskeyId())
	if err != nil {
		return nil, err
	}
	return &managementv1.RemovePasskeyResponse{Details: writeDetails(evs)}, nil
}

// RemoveHumanPasswordless removes a passkey (management v1).
func (s *Server) RemoveHumanPasswordless(ctx context.Context, req *managementv1.RemoveHumanPasswordlessRequest) (*managementv1.RemoveHumanPasswordlessResponse, error) {
	evs, err := s.removeWebAuthn(ctx, req, users.FactorPasswordless, req.GetTokenId())
	if err != nil {
		return nil, err
	}
	return &managementv1.RemoveHumanPasswordlessResponse{Details: writeDetails(evs)}, nil
}
