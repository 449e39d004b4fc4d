package management

import (
	"context"

	managementv1 "github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/management/v1"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/apierr"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/authz"
)

// RemoveMachineSecret removes a machine user's client secret. Without a
// secret there is nothing to change: Aborted (409). A human user is
// NotFound.
func (s *Server) RemoveMachineSecret(ctx context.Context, req *managementv1.RemoveMachineSecretRequest) (*managementv1.RemoveMachineSecretResponse, error) {
	lim, err := apierr.CheckLimits(req) // the id's maximum length is in the proto
	if err != nil {
		return nil, err
	}
	u, err := s.user(ctx, lim, "user_id", req.GetUserId())
	if err != nil {
		return nil, err
	}
	evs, err := s.UserCmds.RemoveSecret(ctx, authz.FromContext(ctx).UserID, u)
	if err != nil {
		return nil, err
	}
	s.cutAccess(ctx) // the removed secret's tokens go
	return &managementv1.RemoveMachineSecretResponse{Details: writeDetails(evs)}, nil
}
