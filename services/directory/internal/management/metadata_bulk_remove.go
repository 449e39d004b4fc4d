package management

import (
	"context"

	managementv1 "github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/management/v1"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/apierr"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/authz"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/metadata"
)

// BulkRemoveUserMetadata is the seed's "Bulk Delete Metadata"
// (DELETE /management/v1/users/{id}/metadata/_bulk, body {"keys": [...]}):
// it removes 1-100 entries of a user in one change. keys is required; a key
// given twice is removed once. When any key is not set the answer is
// NotFound naming those keys and nothing is removed.
func (s *Server) BulkRemoveUserMetadata(ctx context.Context, req *managementv1.BulkRemoveUserMetadataRequest) (*managementv1.BulkRemoveUserMetadataResponse, error) {
	m := req
	lim, err := apierr.CheckLimits(m) // the maximum lengths and counts are in the proto
	if err != nil {
		return nil, err
	}
	var f apierr.Fields
	f.Check(lim.Length("id", "id", m.GetId(), 1))
	metadata.CheckKeys(&f, lim, "keys", m.GetKeys())
	lim.Rest(&f)
	if err := f.Err("METADATA-invalid"); err != nil {
		return nil, err
	}
	u, err := s.user(ctx, lim, "id", m.GetId())
	if err != nil {
		return nil, err
	}
	evs, err := s.metadataCommands().Remove(ctx, authz.FromContext(ctx).UserID, u, m.GetKeys())
	if err != nil {
		return nil, err
	}
	return &managementv1.BulkRemoveUserMetadataResponse{Details: writeDetails(evs)}, nil
}
