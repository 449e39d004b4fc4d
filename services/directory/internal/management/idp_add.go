package management

import (
	"context"

	managementv1 "github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/management/v1"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/apierr"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/authz"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/idps"
)

// AddOrgOIDCIDP adds an active OIDC identity provider to the organization.
// Its client secret is stored encrypted and never returned; a name already
// used in the organization is AlreadyExists.
func (s *Server) AddOrgOIDCIDP(ctx context.Context, req *managementv1.AddOrgOIDCIDPRequest) (*managementv1.AddOrgOIDCIDPResponse, error) {
	m := req
	lim, err := apierr.CheckLimits(m) // the maximum lengths and counts are in the proto
	if err != nil {
		return nil, err
	}
	var f apierr.Fields
	f.Check(lim.Length("name", "name", m.GetName(), 1))
	checkEnum(&f, "styling_type", int32(m.GetStylingType()), managementv1.StylingType_name)
	cfg := s.checkOIDCConfig(&f, lim, m.GetClientId(), m.GetIssuer(), m.GetScopes(), m.GetDisplayNameMapping(), m.GetUsernameMapping())
	f.Check(lim.Length("client_secret", "client_secret", m.GetClientSecret(), 1))
	lim.Rest(&f)
	if err := f.Err("IDP-invalid"); err != nil {
		return nil, err
	}
	org, err := s.org(ctx)
	if err != nil {
		return nil, err
	}
	id, evs, err := s.idpCommands().AddOIDC(ctx, authz.FromContext(ctx).UserID, org.ID, idps.NewOIDC{
		Name: m.GetName(), StylingType: int32(m.GetStylingType()), AutoRegister: m.GetAutoRegister(),
		Config: cfg, ClientSecret: m.GetClientSecret(),
	})
	if err != nil {
		return nil, err
	}
	return &managementv1.AddOrgOIDCIDPResponse{Details: writeDetails(evs), IdpId: id}, nil
}
