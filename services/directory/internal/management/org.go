package management

import (
	"context"
	"errors"

	"github.com/gatehouse-id/gatehouse/pkg/db"
	managementv1 "github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/management/v1"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/apierr"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/authz"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/orgs"
)

// org loads the caller's target organization.
func (s *Server) org(ctx context.Context) (*orgs.Org, error) {
	c := authz.FromContext(ctx)
	o, err := s.Orgs.Get(ctx, c.OrgID)
	if errors.Is(err, db.ErrNotFound) {
		return nil, apierr.NotFound("ORG-not-found", "organization not found")
	}
	return o, err
}

// GetMyOrg returns the target organization.
func (s *Server) GetMyOrg(ctx context.Context, _ *managementv1.GetMyOrgRequest) (*managementv1.GetMyOrgResponse, error) {
	o, err := s.org(ctx)
	if err != nil {
		return nil, err
	}
	return &managementv1.GetMyOrgResponse{Org: orgToProto(o)}, nil
}

func orgToProto(o *orgs.Org) *managementv1.Org {
	return &managementv1.Org{
		Id:            o.ID,
		Details:       readDetails(o.CreationDate, o.ChangeDate, o.Sequence, o.ID),
		State:         managementv1.OrgState(o.State),
		Name:          o.Name,
		PrimaryDomain: o.PrimaryDomain,
	}
}

// AddOrg creates an organization with the caller as its ORG_OWNER.
func (s *Server) AddOrg(ctx context.Context, req *managementv1.AddOrgRequest) (*managementv1.AddOrgResponse, error) {
	lim, err := apierr.CheckLimits(req) // the name's maximum length is in the proto
	if err != nil {
		return nil, err
	}
	var f apierr.Fields
	f.Check(lim.Length("name", "name", req.GetName(), 1))
	lim.Rest(&f)
	if err := f.Err("ORG-invalid"); err != nil {
		return nil, err
	}
	c := authz.FromContext(ctx)
	id, evs, err := s.OrgCmds.AddOrg(ctx, c.UserID, req.GetName(), []string{c.UserID})
	if err != nil {
		return nil, apierr.FromStore(err, "organization "+req.GetName())
	}
	return &managementv1.AddOrgResponse{Id: id, Details: writeDetails(evs)}, nil
}
