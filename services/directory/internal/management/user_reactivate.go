package management

import (
	"context"

	managementv1 "github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/management/v1"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/apierr"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/authz"
)

// ReactivateUser reactivates a deactivated user. A user that is not
// inactive is Aborted (409).
func (s *Server) ReactivateUser(ctx context.Context, req *managementv1.ReactivateUserRequest) (*managementv1.ReactivateUserResponse, error) {
	lim, err := apierr.CheckLimits(req) // the id's maximum length is in the proto
	if err != nil {
		return nil, err
	}
	u, err := s.user(ctx, lim, "id", req.GetId())
	if err != nil {
		return nil, err
	}
	evs, err := s.UserCmds.Reactivate(ctx, authz.FromContext(ctx).UserID, u)
	if err != nil {
		return nil, err
	}
	return &managementv1.ReactivateUserResponse{Details: writeDetails(evs)}, nil
}
