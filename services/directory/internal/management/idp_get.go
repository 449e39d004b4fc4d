package management

import (
	"context"

	"connectrpc.com/connect"

	managementv1 "github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/management/v1"
)

// GetOrgIDPByID returns an identity provider of the organization, without
// its client secret.
func (s *Server) GetOrgIDPByID(ctx context.Context, req *connect.Request[managementv1.GetOrgIDPByIDRequest]) (*connect.Response[managementv1.GetOrgIDPByIDResponse], error) {
	p, err := s.idp(ctx, "id", req.Msg.GetId())
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&managementv1.GetOrgIDPByIDResponse{Idp: idpToProto(p)}), nil
}
