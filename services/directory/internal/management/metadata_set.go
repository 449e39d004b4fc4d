package management

import (
	"context"

	managementv1 "github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/management/v1"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/apierr"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/authz"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/metadata"
)

// SetUserMetadata adds or replaces one metadata entry of a user: key 1-200
// characters, value 1-500000 bytes (InvalidArgument otherwise); NotFound
// for a user not of the organization.
func (s *Server) SetUserMetadata(ctx context.Context, req *managementv1.SetUserMetadataRequest) (*managementv1.SetUserMetadataResponse, error) {
	m := req
	lim, err := apierr.CheckLimits(m) // the maximum lengths and counts are in the proto
	if err != nil {
		return nil, err
	}
	var f apierr.Fields
	f.Check(lim.Length("id", "id", m.GetId(), 1))
	metadata.CheckKey(&f, lim, "key", m.GetKey())
	metadata.CheckValue(&f, lim, "value", m.GetValue())
	lim.Rest(&f)
	if err := f.Err("METADATA-invalid"); err != nil {
		return nil, err
	}
	u, err := s.user(ctx, lim, "id", m.GetId())
	if err != nil {
		return nil, err
	}
	evs, err := s.metadataCommands().Set(ctx, authz.FromContext(ctx).UserID, u, []metadata.Entry{{Key: m.GetKey(), Value: m.GetValue()}})
	if err != nil {
		return nil, err
	}
	return &managementv1.SetUserMetadataResponse{Id: u.ID, Details: writeDetails(evs)}, nil
}
