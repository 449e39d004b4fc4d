package management

import (
	"context"
	"errors"

	"github.com/gatehouse-id/gatehouse/pkg/db"
	managementv1 "github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/management/v1"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/apierr"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/authz"
)

// RemoveOrgMember revokes every organization role of a member; NotFound
// when the user is no member of the organization.
func (s *Server) RemoveOrgMember(ctx context.Context, req *managementv1.RemoveOrgMemberRequest) (*managementv1.RemoveOrgMemberResponse, error) {
	m := req
	lim, err := apierr.CheckLimits(m) // the maximum lengths are in the proto
	if err != nil {
		return nil, err
	}
	var f apierr.Fields
	f.Check(lim.Length("user_id", "user_id", m.GetUserId(), 1))
	lim.Rest(&f)
	if err := f.Err("MEMBER-invalid"); err != nil {
		return nil, err
	}
	org, err := s.org(ctx)
	if err != nil {
		return nil, err
	}
	if _, err := s.Orgs.Member(ctx, org.ID, m.GetUserId()); errors.Is(err, db.ErrNotFound) {
		return nil, apierr.NotFound("MEMBER-not-found", "the user is not a member of the organization")
	} else if err != nil {
		return nil, err
	}
	evs, err := s.OrgCmds.RemoveMember(ctx, authz.FromContext(ctx).UserID, org, m.GetUserId())
	if err != nil {
		return nil, apierr.FromStore(err, "member")
	}
	s.cutAccess(ctx) // an impersonator's tokens go with its role
	return &managementv1.RemoveOrgMemberResponse{Details: writeDetails(evs)}, nil
}
