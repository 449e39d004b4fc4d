package management

import (
	"context"

	managementv1 "github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/management/v1"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/apierr"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/authz"
)

// RemoveOrgIDP removes an identity provider; afterwards it is NotFound.
func (s *Server) RemoveOrgIDP(ctx context.Context, req *managementv1.RemoveOrgIDPRequest) (*managementv1.RemoveOrgIDPResponse, error) {
	lim, err := apierr.CheckLimits(req) // the id's maximum length is in the proto
	if err != nil {
		return nil, err
	}
	p, err := s.idp(ctx, lim, "idp_id", req.GetIdpId())
	if err != nil {
		return nil, err
	}
	evs, err := s.idpCommands().Remove(ctx, authz.FromContext(ctx).UserID, p)
	if err != nil {
		return nil, err
	}
	s.cutAccess(ctx) // its users' links went, and what they signed in
	return &managementv1.RemoveOrgIDPResponse{Details: writeDetails(evs)}, nil
}
