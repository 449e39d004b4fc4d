package management

import (
	"context"

	managementv1 "github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/management/v1"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/apierr"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/authz"
)

// RemoveUser removes a user with its password history, keys, secret and
// metadata, and its memberships of organizations and the instance, in one
// transaction. The user name (and machine client id) become free again.
// The details are those of the user's removal event, the last one added.
func (s *Server) RemoveUser(ctx context.Context, req *managementv1.RemoveUserRequest) (*managementv1.RemoveUserResponse, error) {
	lim, err := apierr.CheckLimits(req) // the id's maximum length is in the proto
	if err != nil {
		return nil, err
	}
	u, err := s.user(ctx, lim, "id", req.GetId())
	if err != nil {
		return nil, err
	}
	evs, err := s.UserCmds.Remove(ctx, authz.FromContext(ctx).UserID, u)
	if err != nil {
		return nil, err
	}
	s.cutAccess(ctx)
	return &managementv1.RemoveUserResponse{Details: writeDetails(evs)}, nil
}
