package management

import (
	"context"

	managementv1 "github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/management/v1"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/apierr"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/authz"
)

// DeactivateOrgIDP hides an active identity provider from the login;
// Aborted (409) when it is not active.
func (s *Server) DeactivateOrgIDP(ctx context.Context, req *managementv1.DeactivateOrgIDPRequest) (*managementv1.DeactivateOrgIDPResponse, error) {
	lim, err := apierr.CheckLimits(req) // the id's maximum length is in the proto
	if err != nil {
		return nil, err
	}
	p, err := s.idp(ctx, lim, "idp_id", req.GetIdpId())
	if err != nil {
		return nil, err
	}
	evs, err := s.idpCommands().Deactivate(ctx, authz.FromContext(ctx).UserID, p)
	if err != nil {
		return nil, err
	}
	return &managementv1.DeactivateOrgIDPResponse{Details: writeDetails(evs)}, nil
}

// SetOrgIDPTrust trusts, or stops trusting, the provider's "amr" values
// (IAM owners only, see Rules).
func (s *Server) SetOrgIDPTrust(ctx context.Context, req *managementv1.SetOrgIDPTrustRequest) (*managementv1.SetOrgIDPTrustResponse, error) {
	lim, err := apierr.CheckLimits(req) // the id's maximum length is in the proto
	if err != nil {
		return nil, err
	}
	p, err := s.idp(ctx, lim, "idp_id", req.GetIdpId())
	if err != nil {
		return nil, err
	}
	evs, err := s.idpCommands().SetTrust(ctx, authz.FromContext(ctx).UserID, p, req.GetTrustAmr())
	if err != nil {
		return nil, err
	}
	return &managementv1.SetOrgIDPTrustResponse{Details: writeDetails(evs)}, nil
}

// ReactivateOrgIDP offers a deactivated identity provider again; Aborted
// (409) when it is not inactive.
func (s *Server) ReactivateOrgIDP(ctx context.Context, req *managementv1.ReactivateOrgIDPRequest) (*managementv1.ReactivateOrgIDPResponse, error) {
	lim, err := apierr.CheckLimits(req) // the id's maximum length is in the proto
	if err != nil {
		return nil, err
	}
	p, err := s.idp(ctx, lim, "idp_id", req.GetIdpId())
	if err != nil {
		return nil, err
	}
	evs, err := s.idpCommands().Reactivate(ctx, authz.FromContext(ctx).UserID, p)
	if err != nil {
		return nil, err
	}
	return &managementv1.ReactivateOrgIDPResponse{Details: writeDetails(evs)}, nil
}
