package management

import (
	"context"

	managementv1 "github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/management/v1"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/apierr"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/authz"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/metadata"
)

// BulkSetUserMetadata adds or replaces 1-100 entries of a user in one
// change. Every entry is validated before anything is written (keys 1-200
// characters and distinct, values 1-500000 bytes); one bad entry refuses
// the whole request with InvalidArgument naming each problem.
func (s *Server) BulkSetUserMetadata(ctx context.Context, req *managementv1.BulkSetUserMetadataRequest) (*managementv1.BulkSetUserMetadataResponse, error) {
	m := req
	entries := make([]metadata.Entry, len(m.GetMetadata()))
	for i, e := range m.GetMetadata() {
		entries[i] = metadata.Entry{Key: e.GetKey(), Value: e.GetValue()}
	}
	lim, err := apierr.CheckLimits(m) // the maximum lengths and counts are in the proto
	if err != nil {
		return nil, err
	}
	var f apierr.Fields
	f.Check(lim.Length("id", "id", m.GetId(), 1))
	metadata.CheckEntries(&f, lim, "metadata", entries)
	lim.Rest(&f)
	if err := f.Err("METADATA-invalid"); err != nil {
		return nil, err
	}
	u, err := s.user(ctx, lim, "id", m.GetId())
	if err != nil {
		return nil, err
	}
	evs, err := s.metadataCommands().Set(ctx, authz.FromContext(ctx).UserID, u, entries)
	if err != nil {
		return nil, err
	}
	return &managementv1.BulkSetUserMetadataResponse{Details: writeDetails(evs)}, nil
}
