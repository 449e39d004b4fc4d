package management

import (
	"context"

	managementv1 "github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/management/v1"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/apierr"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/authz"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/metadata"
)

// RemoveUserMetadata removes one entry of a user; NotFound for an unknown
// key or a user not of the organization.
func (s *Server) RemoveUserMetadata(ctx context.Context, req *managementv1.RemoveUserMetadataRequest) (*managementv1.RemoveUserMetadataResponse, error) {
	m := req
	lim, err := apierr.CheckLimits(m) // the maximum lengths and counts are in the proto
	if err != nil {
		return nil, err
	}
	var f apierr.Fields
	f.Check(lim.Length("id", "id", m.GetId(), 1))
	metadata.CheckKey(&f, lim, "key", m.GetKey())
	lim.Rest(&f)
	if err := f.Err("METADATA-invalid"); err != nil {
		return nil, err
	}
	u, err := s.user(ctx, lim, "id", m.GetId())
	if err != nil {
		return nil, err
	}
	evs, err := s.metadataCommands().Remove(ctx, authz.FromContext(ctx).UserID, u, []string{m.GetKey()})
	if err != nil {
		return nil, err
	}
	return &managementv1.RemoveUserMetadataResponse{Details: writeDetails(evs)}, nil
}
