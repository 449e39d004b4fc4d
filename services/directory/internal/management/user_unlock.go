package management

import (
	"context"

	managementv1 "github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/management/v1"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/apierr"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/authz"
)

// UnlockUser lifts a user's failed-password limits at once (every client
// address's delay and the organization's account lock; package lockout)
// and records it. It succeeds in every state of the user.
func (s *Server) UnlockUser(ctx context.Context, req *managementv1.UnlockUserRequest) (*managementv1.UnlockUserResponse, error) {
	lim, err := apierr.CheckLimits(req) // the id's maximum length is in the proto
	if err != nil {
		return nil, err
	}
	u, err := s.user(ctx, lim, "id", req.GetId())
	if err != nil {
		return nil, err
	}
	evs, err := s.UserCmds.Unlock(ctx, authz.FromContext(ctx).UserID, u)
	if err != nil {
		return nil, err
	}
	return &managementv1.UnlockUserResponse{Details: writeDetails(evs)}, nil
}
