package management

import (
	"context"

	managementv1 "github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/management/v1"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/apierr"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/authz"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/users"
)

// AddMachineUser creates a machine user (service account); it
// authenticates with a key (AddMachineKey) or a secret
// (GenerateMachineSecret).
func (s *Server) AddMachineUser(ctx context.Context, req *managementv1.AddMachineUserRequest) (*managementv1.AddMachineUserResponse, error) {
	m := req
	lim, err := apierr.CheckLimits(m) // the maximum lengths are in the proto
	if err != nil {
		return nil, err
	}
	var f apierr.Fields
	checkUserName(&f, m.GetUserName())
	f.Check(lim.Length("name", "name", m.GetName(), 1))
	f.Check(lim.Length("description", "description", m.GetDescription(), 0))
	if _, ok := managementv1.AccessTokenType_name[int32(m.GetAccessTokenType())]; !ok {
		f.Add("access_token_type", "is not a defined value")
	}
	lim.ReportedIn(f, "user_name") // users.CheckUserName words it; registration and external identities use it too
	lim.Rest(&f)
	if err := f.Err("USER-invalid"); err != nil {
		return nil, err
	}
	org, err := s.org(ctx)
	if err != nil {
		return nil, err
	}
	id, evs, err := s.UserCmds.AddMachine(ctx, authz.FromContext(ctx).UserID, org, users.MachineAdded{
		UserName: m.GetUserName(), Name: m.GetName(), Description: m.GetDescription(), AccessTokenType: int32(m.GetAccessTokenType()),
	})
	if err != nil {
		return nil, err
	}
	return &managementv1.AddMachineUserResponse{UserId: id, Details: writeDetails(evs)}, nil
}
