package management

import (
	"context"

	managementv1 "github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/management/v1"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/apierr"
)

// GetOrgIDPByID returns an identity provider of the organization, without
// its client secret.
func (s *Server) GetOrgIDPByID(ctx context.Context, req *managementv1.GetOrgIDPByIDRequest) (*managementv1.GetOrgIDPByIDResponse, error) {
	lim, err := apierr.CheckLimits(req) // the id's maximum length is in the proto
	if err != nil {
		return nil, err
	}
	p, err := s.idp(ctx, lim, "id", req.GetId())
	if err != nil {
		return nil, err
	}
	return &managementv1.GetOrgIDPByIDResponse{Idp: idpToProto(p)}, nil
}
