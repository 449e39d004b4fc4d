package management

import (
	"context"

	managementv1 "github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/management/v1"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/apierr"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/authz"
)

// DeactivateUser deactivates an active user: no login and no new tokens
// until reactivated. A user in any other state is Aborted (409).
func (s *Server) DeactivateUser(ctx context.Context, req *managementv1.DeactivateUserRequest) (*managementv1.DeactivateUserResponse, error) {
	lim, err := apierr.CheckLimits(req) // the id's maximum length is in the proto
	if err != nil {
		return nil, err
	}
	u, err := s.user(ctx, lim, "id", req.GetId())
	if err != nil {
		return nil, err
	}
	evs, err := s.UserCmds.Deactivate(ctx, authz.FromContext(ctx).UserID, u)
	if err != nil {
		return nil, err
	}
	s.cutAccess(ctx)
	return &managementv1.DeactivateUserResponse{Details: writeDetails(evs)}, nil
}
