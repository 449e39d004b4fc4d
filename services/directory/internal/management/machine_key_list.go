package management

import (
	"context"

	"google.golang.org/protobuf/types/known/timestamppb"

	managementv1 "github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/management/v1"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/apierr"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/users"
)

// ListMachineKeys lists the keys of a machine user (metadata only), by
// creation date. A human user is NotFound.
func (s *Server) ListMachineKeys(ctx context.Context, req *managementv1.ListMachineKeysRequest) (*managementv1.ListMachineKeysResponse, error) {
	lim, err := apierr.CheckLimits(req) // the maximums of query.limit and user_id are in the proto
	if err != nil {
		return nil, err
	}
	var f apierr.Fields
	page := usersPage(&f, lim, req.GetQuery())
	if err := f.Err("USER-invalid-query"); err != nil {
		return nil, err
	}
	// user_id's limit, as ever after the query's problems, and the rest.
	u, err := s.user(ctx, lim, "user_id", req.GetUserId())
	if err != nil {
		return nil, err
	}
	if u.Type != users.TypeMachine {
		return nil, apierr.NotFound("USER-not-machine", "machine user not found")
	}
	keys, total, err := s.Users.MachineKeys(ctx, u.ID, page)
	if err != nil {
		return nil, err
	}
	details, err := s.usersListDetails(ctx, total)
	if err != nil {
		return nil, err
	}
	out := &managementv1.ListMachineKeysResponse{Details: details, Result: make([]*managementv1.Key, len(keys))}
	for i, k := range keys {
		key := &managementv1.Key{
			Id:      k.ID,
			Details: readDetails(k.CreationDate, k.ChangeDate, k.Sequence, k.OrgID),
			Type:    managementv1.KeyType(k.Type),
		}
		if k.ExpirationDate != nil {
			key.ExpirationDate = timestamppb.New(*k.ExpirationDate)
		}
		out.Result[i] = key
	}
	return out, nil
}
