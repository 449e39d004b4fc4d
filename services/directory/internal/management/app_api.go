package management

import (
	"context"

	managementv1 "github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/management/v1"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/apierr"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/authz"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/projects"
)

// AddAPIApp creates an API application (a resource server that
// introspects tokens); the client secret (BASIC) is in this response only.
func (s *Server) AddAPIApp(ctx context.Context, req *managementv1.AddAPIAppRequest) (*managementv1.AddAPIAppResponse, error) {
	m := req
	lim, err := apierr.CheckLimits(m) // the maximum lengths and counts are in the proto
	if err != nil {
		return nil, err
	}
	var f apierr.Fields
	f.Check(lim.Length("project_id", "project_id", m.GetProjectId(), 1))
	f.Check(lim.Length("name", "name", m.GetName(), 1))
	cfg := projects.APIConfig{AuthMethod: appEnumToDomain(apiAuthMethods, m.GetAuthMethodType())}
	cfg.Validate(&f)
	lim.Rest(&f)
	if err := f.Err("APP-invalid"); err != nil {
		return nil, err
	}
	p, err := s.project(ctx, m.GetProjectId())
	if err != nil {
		return nil, err
	}
	app, evs, err := s.projectCommands().AddAPIApp(ctx, authz.FromContext(ctx).UserID, p, m.GetName(), cfg)
	if err != nil {
		return nil, err
	}
	return &managementv1.AddAPIAppResponse{
		AppId: app.ID, Details: writeDetails(evs), ClientId: app.ClientID, ClientSecret: app.Secret,
	}, nil
}
