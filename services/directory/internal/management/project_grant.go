package management

import (
	"context"
	"errors"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/gatehouse-id/gatehouse/pkg/db"
	managementv1 "github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/management/v1"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/apierr"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/authz"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/projects"
)

// Project grants let another organization's users sign in to a project's
// applications (ZITADEL's project grants, v1 paths). Project roles do not
// exist yet, so role keys must be empty: a grant that named roles would
// promise what nothing enforces.

func checkRoleKeys(f *apierr.Fields, keys []string) {
	if len(keys) > 0 {
		f.Add("role_keys", "must be empty: project roles are not supported")
	}
}

// grant loads a grant of a project of the target organization. The ids are
// the request's project_id and grant_id, whose maximum length (200) is a
// string.max_len rule in the proto: lim reports it, and after it any limit
// of the request no check reported before, as PROJECT-GRANT-invalid-id.
func (s *Server) grant(ctx context.Context, lim *apierr.Limits, projectID, grantID string) (*projects.Project, *projects.Grant, error) {
	var f apierr.Fields
	f.Check(lim.Length("project_id", "project_id", projectID, 1))
	f.Check(lim.Length("grant_id", "grant_id", grantID, 1))
	lim.Rest(&f)
	if err := f.Err("PROJECT-GRANT-invalid-id"); err != nil {
		return nil, nil, err
	}
	p, err := s.project(ctx, projectID)
	if err != nil {
		return nil, nil, err
	}
	g, err := s.projectQueries().Grant(ctx, p.ID, grantID)
	if errors.Is(err, db.ErrNotFound) {
		return nil, nil, apierr.NotFound("PROJECT-GRANT-not-found", "project grant not found")
	}
	return p, g, err
}

// AddProjectGrant grants a project of the organization to another one.
func (s *Server) AddProjectGrant(ctx context.Context, req *managementv1.AddProjectGrantRequest) (*managementv1.AddProjectGrantResponse, error) {
	m := req
	lim, err := apierr.CheckLimits(m) // the maximum lengths are in the proto
	if err != nil {
		return nil, err
	}
	var f apierr.Fields
	f.Check(lim.Length("project_id", "project_id", m.GetProjectId(), 1))
	f.Check(lim.Length("granted_org_id", "granted_org_id", m.GetGrantedOrgId(), 1))
	checkRoleKeys(&f, m.GetRoleKeys())
	lim.Rest(&f)
	if err := f.Err("PROJECT-GRANT-invalid"); err != nil {
		return nil, err
	}
	c := authz.FromContext(ctx)
	if m.GetGrantedOrgId() == c.OrgID {
		return nil, apierr.InvalidArgument("PROJECT-GRANT-own-org", "a project cannot be granted to its own organization")
	}
	p, err := s.project(ctx, m.GetProjectId())
	if err != nil {
		return nil, err
	}
	if _, err := s.Orgs.Get(ctx, m.GetGrantedOrgId()); errors.Is(err, db.ErrNotFound) {
		return nil, apierr.NotFound("PROJECT-GRANT-org-not-found", "organization not found")
	} else if err != nil {
		return nil, err
	}
	id, evs, err := s.projectCommands().AddGrant(ctx, c.UserID, p, m.GetGrantedOrgId(), nil)
	if err != nil {
		return nil, err
	}
	return &managementv1.AddProjectGrantResponse{GrantId: id, Details: writeDetails(evs)}, nil
}

// ListProjectGrants lists a project's grants by creation date.
func (s *Server) ListProjectGrants(ctx context.Context, req *managementv1.ListProjectGrantsRequest) (*managementv1.ListProjectGrantsResponse, error) {
	lim, err := apierr.CheckLimits(req) // the maximums of query.limit and project_id are in the proto
	if err != nil {
		return nil, err
	}
	var f apierr.Fields
	page := usersPage(&f, lim, req.GetQuery())
	f.Check(lim.Length("project_id", "project_id", req.GetProjectId(), 1))
	lim.Rest(&f)
	if err := f.Err("PROJECT-GRANT-invalid-query"); err != nil {
		return nil, err
	}
	p, err := s.project(ctx, req.GetProjectId())
	if err != nil {
		return nil, err
	}
	grants, total, err := s.projectQueries().Grants(ctx, p.ID, page.Offset, page.Limit, page.Asc)
	if err != nil {
		return nil, err
	}
	owner, err := s.org(ctx)
	if err != nil {
		return nil, err
	}
	seq, at, err := s.projectQueries().LastEvent(ctx, p.ID)
	if err != nil {
		return nil, err
	}
	out := &managementv1.ListProjectGrantsResponse{
		Details: &managementv1.ListDetails{TotalResult: total, ProcessedSequence: seq, ViewTimestamp: timestamppb.New(at)},
		Result:  make([]*managementv1.ProjectGrant, 0, len(grants)),
	}
	for _, g := range grants {
		pg := &managementv1.ProjectGrant{
			GrantId:          g.ID,
			Details:          readDetails(g.CreationDate, g.ChangeDate, g.Sequence, g.OrgID),
			GrantedOrgId:     g.GrantedOrgID,
			GrantedRoleKeys:  g.RoleKeys(),
			State:            managementv1.ProjectGrantState(g.State),
			ProjectId:        p.ID,
			ProjectName:      p.Name,
			ProjectOwnerId:   owner.ID,
			ProjectOwnerName: owner.Name,
		}
		if o, err := s.Orgs.Get(ctx, g.GrantedOrgID); err == nil {
			pg.GrantedOrgName = o.Name
		} else if !errors.Is(err, db.ErrNotFound) {
			return nil, err
		}
		out.Result = append(out.Result, pg)
	}
	return out, nil
}

// ListGrantedProjects lists the grants made to the target organization,
// by creation date: who may sign in its users, and to which projects.
func (s *Server) ListGrantedProjects(ctx context.Context, req *managementv1.ListGrantedProjectsRequest) (*managementv1.ListGrantedProjectsResponse, error) {
	lim, err := apierr.CheckLimits(req) // query.limit's maximum is in the proto
	if err != nil {
		return nil, err
	}
	var f apierr.Fields
	page := usersPage(&f, lim, req.GetQuery())
	lim.Rest(&f)
	if err := f.Err("PROJECT-GRANT-invalid-query"); err != nil {
		return nil, err
	}
	me, err := s.org(ctx)
	if err != nil {
		return nil, err
	}
	grants, total, err := s.projectQueries().Received(ctx, me.ID, page.Offset, page.Limit, page.Asc)
	if err != nil {
		return nil, err
	}
	// The details name the organization's last change, or a later one of
	// a grant it received.
	seq, at := me.Sequence, me.ChangeDate
	for _, g := range grants {
		if g.Sequence > seq {
			seq, at = g.Sequence, g.ChangeDate
		}
	}
	out := &managementv1.ListGrantedProjectsResponse{
		Details: &managementv1.ListDetails{TotalResult: total, ProcessedSequence: seq, ViewTimestamp: timestamppb.New(at)},
		Result:  make([]*managementv1.ProjectGrant, 0, len(grants)),
	}
	for _, g := range grants {
		out.Result = append(out.Result, &managementv1.ProjectGrant{
			GrantId:          g.ID,
			Details:          readDetails(g.CreationDate, g.ChangeDate, g.Sequence, g.OrgID),
			GrantedOrgId:     me.ID,
			GrantedOrgName:   me.Name,
			GrantedRoleKeys:  g.RoleKeys(),
			State:            managementv1.ProjectGrantState(g.State),
			ProjectId:        g.ProjectID,
			ProjectName:      g.ProjectName,
			ProjectOwnerId:   g.OrgID,
			ProjectOwnerName: g.ProjectOwner,
		})
	}
	return out, nil
}

// RefuseGrantedProject removes a grant made to the target organization, on
// behalf of that organization: a grant is another organization's access to
// its users, which it may decline. A grant made to another organization is
// NotFound, as an unknown one.
func (s *Server) RefuseGrantedProject(ctx context.Context, req *managementv1.RefuseGrantedProjectRequest) (*managementv1.RefuseGrantedProjectResponse, error) {
	m := req
	lim, err := apierr.CheckLimits(m) // the maximum lengths are in the proto
	if err != nil {
		return nil, err
	}
	var f apierr.Fields
	f.Check(lim.Length("project_id", "project_id", m.GetProjectId(), 1))
	f.Check(lim.Length("grant_id", "grant_id", m.GetGrantId(), 1))
	lim.Rest(&f)
	if err := f.Err("PROJECT-GRANT-invalid-id"); err != nil {
		return nil, err
	}
	c := authz.FromContext(ctx)
	g, err := s.projectQueries().ReceivedGrant(ctx, c.OrgID, m.GetProjectId(), m.GetGrantId())
	if errors.Is(err, db.ErrNotFound) {
		return nil, apierr.NotFound("PROJECT-GRANT-not-found", "project grant not found")
	}
	if err != nil {
		return nil, err
	}
	p, err := s.projectQueries().Project(ctx, g.OrgID, g.ProjectID)
	if errors.Is(err, db.ErrNotFound) {
		return nil, apierr.NotFound("PROJECT-GRANT-not-found", "project grant not found")
	}
	if err != nil {
		return nil, err
	}
	evs, err := s.projectCommands().RemoveGrant(ctx, c.UserID, p, g)
	if err != nil {
		return nil, err
	}
	s.cutAccess(ctx)
	return &managementv1.RefuseGrantedProjectResponse{Details: writeDetails(evs)}, nil
}

// UpdateProjectGrant replaces a grant's role keys.
func (s *Server) UpdateProjectGrant(ctx context.Context, req *managementv1.UpdateProjectGrantRequest) (*managementv1.UpdateProjectGrantResponse, error) {
	lim, err := apierr.CheckLimits(req) // the ids' maximum length is in the proto
	if err != nil {
		return nil, err
	}
	var f apierr.Fields
	checkRoleKeys(&f, req.GetRoleKeys())
	if err := f.Err("PROJECT-GRANT-invalid"); err != nil {
		return nil, err
	}
	// The ids' limits, as ever after the role keys' problem, and the rest.
	p, g, err := s.grant(ctx, lim, req.GetProjectId(), req.GetGrantId())
	if err != nil {
		return nil, err
	}
	evs, err := s.projectCommands().ChangeGrant(ctx, authz.FromContext(ctx).UserID, p, g, nil)
	if err != nil {
		return nil, err
	}
	return &managementv1.UpdateProjectGrantResponse{Details: writeDetails(evs)}, nil
}

// RemoveProjectGrant removes a grant.
func (s *Server) RemoveProjectGrant(ctx context.Context, req *managementv1.RemoveProjectGrantRequest) (*managementv1.RemoveProjectGrantResponse, error) {
	lim, err := apierr.CheckLimits(req) // the ids' maximum length is in the proto
	if err != nil {
		return nil, err
	}
	p, g, err := s.grant(ctx, lim, req.GetProjectId(), req.GetGrantId())
	if err != nil {
		return nil, err
	}
	evs, err := s.projectCommands().RemoveGrant(ctx, authz.FromContext(ctx).UserID, p, g)
	if err != nil {
		return nil, err
	}
	s.cutAccess(ctx)
	return &managementv1.RemoveProjectGrantResponse{Details: writeDetails(evs)}, nil
}
