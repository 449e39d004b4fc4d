package management

import (
	"context"

	"connectrpc.com/connect"

	managementv1 "github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/management/v1"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/apierr"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/authz"
)

// RemoveMachineKey removes a key of a machine user; assertions signed with
// it are refused from then on. An unknown key, or one of another user, is
// NotFound.
func (s *Server) RemoveMachineKey(ctx context.Context, req *connect.Request[managementv1.RemoveMachineKeyRequest]) (*connect.Response[managementv1.RemoveMachineKeyResponse], error) {
	if err := apierr.Length("key_id", req.Msg.GetKeyId(), 1, 200); err != nil {
		return nil, apierr.InvalidArgument("USER-invalid-key-id", "%s", err.Error())
	}
	u, err := s.user(ctx, req.Msg.GetUserId())
	if err != nil {
		return nil, err
	}
	evs, err := s.UserCmds.RemoveMachineKey(ctx, authz.FromContext(ctx).UserID, u, req.Msg.GetKeyId())
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&managementv1.RemoveMachineKeyResponse{Details: writeDetails(evs)}), nil
}
