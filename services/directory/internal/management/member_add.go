package management

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/gatehouse-id/gatehouse/pkg/db"
	managementv1 "github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/management/v1"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/apierr"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/authz"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/orgs"
)

// memberRoles checks the roles of a membership: at least one, each an
// organization role (orgs.OrgRoles). A role named twice is granted once.
func memberRoles(f *apierr.Fields, roles []string) []string {
	if len(roles) == 0 {
		f.Add("roles", "must name at least one role")
	}
	out := make([]string, 0, len(roles))
	for i, r := range roles {
		if !slices.Contains(orgs.OrgRoles, r) {
			f.Add(fmt.Sprintf("roles[%d]", i), "must be one of "+strings.Join(orgs.OrgRoles, ", "))
			continue
		}
		if !slices.Contains(out, r) {
			out = append(out, r)
		}
	}
	return out
}

// AddOrgMember grants organization roles to a user of the instance (as in
// ZITADEL, the user may belong to another organization). InvalidArgument
// for no or an unknown role, NotFound for an unknown user, AlreadyExists
// when the user is already a member.
func (s *Server) AddOrgMember(ctx context.Context, req *managementv1.AddOrgMemberRequest) (*managementv1.AddOrgMemberResponse, error) {
	m := req
	lim, err := apierr.CheckLimits(m) // the maximum lengths are in the proto
	if err != nil {
		return nil, err
	}
	var f apierr.Fields
	f.Check(lim.Length("user_id", "user_id", m.GetUserId(), 1))
	roles := memberRoles(&f, m.GetRoles())
	lim.Rest(&f)
	if err := f.Err("MEMBER-invalid"); err != nil {
		return nil, err
	}
	org, err := s.org(ctx)
	if err != nil {
		return nil, err
	}
	if _, err := s.Users.Get(ctx, m.GetUserId()); errors.Is(err, db.ErrNotFound) {
		return nil, apierr.NotFound("MEMBER-user-not-found", "user not found")
	} else if err != nil {
		return nil, err
	}
	// Read after org: a membership added since moved org's version on, so
	// Push refuses this command then.
	if _, err := s.Orgs.Member(ctx, org.ID, m.GetUserId()); err == nil {
		return nil, apierr.AlreadyExists("MEMBER-already-exists", "the user is already a member of the organization")
	} else if !errors.Is(err, db.ErrNotFound) {
		return nil, err
	}
	evs, err := s.OrgCmds.AddMember(ctx, authz.FromContext(ctx).UserID, org, m.GetUserId(), roles)
	if err != nil {
		return nil, apierr.FromStore(err, "member")
	}
	return &managementv1.AddOrgMemberResponse{Details: writeDetails(evs)}, nil
}
