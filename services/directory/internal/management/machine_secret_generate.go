package management

import (
	"context"

	managementv1 "github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/management/v1"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/apierr"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/authz"
)

// GenerateMachineSecret gives a machine user a new client secret, replacing
// any previous one, and returns it once with the client id (the user's
// login name, unique in the instance). Only a keyed hash is stored. A human
// user is NotFound.
func (s *Server) GenerateMachineSecret(ctx context.Context, req *managementv1.GenerateMachineSecretRequest) (*managementv1.GenerateMachineSecretResponse, error) {
	lim, err := apierr.CheckLimits(req) // the id's maximum length is in the proto
	if err != nil {
		return nil, err
	}
	u, err := s.user(ctx, lim, "user_id", req.GetUserId())
	if err != nil {
		return nil, err
	}
	clientID, secret, evs, err := s.UserCmds.GenerateSecret(ctx, authz.FromContext(ctx).UserID, u, s.Hasher)
	if err != nil {
		return nil, err
	}
	s.cutAccess(ctx) // a replaced secret's tokens go
	return &managementv1.GenerateMachineSecretResponse{ClientId: clientID, ClientSecret: secret, Details: writeDetails(evs)}, nil
}
