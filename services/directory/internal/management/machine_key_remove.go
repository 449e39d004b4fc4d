package management

import (
	"context"

	managementv1 "github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/management/v1"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/apierr"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/authz"
)

// RemoveMachineKey removes a key of a machine user; assertions signed with
// it are refused from then on. An unknown key, or one of another user, is
// NotFound.
func (s *Server) RemoveMachineKey(ctx context.Context, req *managementv1.RemoveMachineKeyRequest) (*managementv1.RemoveMachineKeyResponse, error) {
	lim, err := apierr.CheckLimits(req) // the maximum lengths of the ids are in the proto
	if err != nil {
		return nil, err
	}
	if err := lim.Length("key_id", "key_id", req.GetKeyId(), 1); err != nil {
		return nil, apierr.InvalidArgument("USER-invalid-key-id", "%s", err.Error())
	}
	u, err := s.user(ctx, lim, "user_id", req.GetUserId())
	if err != nil {
		return nil, err
	}
	evs, err := s.UserCmds.RemoveMachineKey(ctx, authz.FromContext(ctx).UserID, u, req.GetKeyId())
	if err != nil {
		return nil, err
	}
	s.cutAccess(ctx) // the removed key's tokens go
	return &managementv1.RemoveMachineKeyResponse{Details: writeDetails(evs)}, nil
}
