package management

import (
	"context"

	managementv1 "github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/management/v1"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/apierr"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/authz"
)

// UpdateOrgIDPOIDCConfig replaces an IdP's OIDC configuration: every field
// takes the value sent, so one sent empty is empty afterwards (scopes
// none, mappings UNSPECIFIED), except client_secret, which is kept when
// empty. An update that changes nothing is Aborted (409).
func (s *Server) UpdateOrgIDPOIDCConfig(ctx context.Context, req *managementv1.UpdateOrgIDPOIDCConfigRequest) (*managementv1.UpdateOrgIDPOIDCConfigResponse, error) {
	m := req
	lim, err := apierr.CheckLimits(m) // the maximum lengths and counts are in the proto
	if err != nil {
		return nil, err
	}
	var f apierr.Fields
	f.Check(lim.Length("idp_id", "idp_id", m.GetIdpId(), 1))
	cfg := s.checkOIDCConfig(&f, lim, m.GetClientId(), m.GetIssuer(), m.GetScopes(), m.GetDisplayNameMapping(), m.GetUsernameMapping())
	f.Check(lim.Length("client_secret", "client_secret", m.GetClientSecret(), 0))
	lim.Rest(&f)
	if err := f.Err("IDP-invalid"); err != nil {
		return nil, err
	}
	p, err := s.idp(ctx, lim, "idp_id", m.GetIdpId())
	if err != nil {
		return nil, err
	}
	evs, err := s.idpCommands().UpdateOIDCConfig(ctx, authz.FromContext(ctx).UserID, p, cfg, m.GetClientSecret())
	if err != nil {
		return nil, err
	}
	s.cutAccess(ctx) // another provider: its users' links went, and what they signed in
	return &managementv1.UpdateOrgIDPOIDCConfigResponse{Details: writeDetails(evs)}, nil
}
