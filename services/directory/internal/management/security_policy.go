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

// GetSecurityPolicy returns the organization's security policy: its own,
// or the default (impersonation off; details naming the instance).
func (s *Server) GetSecurityPolicy(ctx context.Context, _ *managementv1.GetSecurityPolicyRequest) (*managementv1.GetSecurityPolicyResponse, error) {
	own, err := s.Orgs.OwnSecurityPolicy(ctx, authz.FromContext(ctx).OrgID)
	if errors.Is(err, db.ErrNotFound) {
		return &managementv1.GetSecurityPolicyResponse{Policy: &managementv1.SecurityPolicy{
			Details: &managementv1.ObjectDetails{ResourceOwner: orgs.InstanceID}}}, nil
	}
	if err != nil {
		return nil, err
	}
	return &managementv1.GetSecurityPolicyResponse{Policy: &managementv1.SecurityPolicy{
		Details:             readDetails(own.CreationDate, own.ChangeDate, own.Sequence, own.OrgID),
		EnableImpersonation: own.EnableImpersonation,
	}}, nil
}

// SetSecurityPolicy sets the organization's security policy; setting it
// as it is changes nothing and answers the current details.
func (s *Server) SetSecurityPolicy(ctx context.Context, req *managementv1.SetSecurityPolicyRequest) (*managementv1.SetSecurityPolicyResponse, error) {
	o, err := s.org(ctx)
	if err != nil {
		return nil, err
	}
	own, err := s.Orgs.OwnSecurityPolicy(ctx, o.ID)
	switch {
	case err == nil && own.EnableImpersonation == req.GetEnableImpersonation():
		return &managementv1.SetSecurityPolicyResponse{Details: readDetails(own.CreationDate, own.ChangeDate, own.Sequence, o.ID)}, nil
	case err != nil && !errors.Is(err, db.ErrNotFound):
		return nil, err
	}
	evs, err := s.OrgCmds.SetSecurityPolicy(ctx, authz.FromContext(ctx).UserID, o, orgs.SecurityPolicy{EnableImpersonation: req.GetEnableImpersonation()})
	if err != nil {
		return nil, apierr.FromStore(err, "security policy")
	}
	s.cutAccess(ctx) // turned off: the impersonations' tokens go
	return &managementv1.SetSecurityPolicyResponse{Details: writeDetails(evs)}, nil
}
