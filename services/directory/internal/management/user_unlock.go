package management

import (
	"context"

	"connectrpc.com/connect"

	managementv1 "github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/management/v1"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/authz"
)

// UnlockUser lifts a user's failed-password limits at once (every client
// address's delay and the organization's account lock; package lockout)
// and records it. It succeeds in every state of the user.
func (s *Server) UnlockUser(ctx context.Context, req *connect.Request[managementv1.UnlockUserRequest]) (*connect.Response[managementv1.UnlockUserResponse], error) {
	u, err := s.user(ctx, req.Msg.GetId())
	if err != nil {
		return nil, err
	}
	evs, err := s.UserCmds.Unlock(ctx, authz.FromContext(ctx).UserID, u)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&managementv1.UnlockUserResponse{Details: writeDetails(evs)}), nil
}
