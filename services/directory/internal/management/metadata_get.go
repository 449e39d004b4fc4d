package management

import (
	"context"
	"errors"

	"github.com/gatehouse-id/gatehouse/pkg/db"
	managementv1 "github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/management/v1"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/apierr"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/metadata"
)

// GetUserMetadata returns one entry of a user with the details of its
// events; NotFound for an unknown key or a user not of the organization.
func (s *Server) GetUserMetadata(ctx context.Context, req *managementv1.GetUserMetadataRequest) (*managementv1.GetUserMetadataResponse, error) {
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
	md, err := s.metadataQueries().Get(ctx, u.ID, m.GetKey())
	if errors.Is(err, db.ErrNotFound) {
		return nil, apierr.NotFound("METADATA-not-found", "metadata %q not found", m.GetKey())
	}
	if err != nil {
		return nil, err
	}
	return &managementv1.GetUserMetadataResponse{Metadata: metadataToProto(md)}, nil
}
