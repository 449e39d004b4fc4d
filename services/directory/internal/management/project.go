package management

import (
	"context"
	"errors"

	"github.com/gatehouse-id/gatehouse/pkg/db"
	managementv1 "github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/management/v1"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/apierr"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/authz"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/projects"
)

func (s *Server) projectQueries() *projects.Queries { return &projects.Queries{DB: s.ES.DB()} }

func (s *Server) projectCommands() *projects.Commands {
	return &projects.Commands{ES: s.ES, Hasher: s.Hasher}
}

// project loads a project of the target organization; projects of other
// organizations are NotFound.
func (s *Server) project(ctx context.Context, id string) (*projects.Project, error) {
	p, err := s.projectQueries().Project(ctx, authz.FromContext(ctx).OrgID, id)
	if errors.Is(err, db.ErrNotFound) {
		return nil, apierr.NotFound("PROJECT-not-found", "project not found")
	}
	return p, err
}

func projectToProto(p *projects.Project) *managementv1.Project {
	return &managementv1.Project{
		Id:                     p.ID,
		Details:                readDetails(p.CreationDate, p.ChangeDate, p.Sequence, p.OrgID),
		Name:                   p.Name,
		State:                  managementv1.ProjectState(p.State),
		ProjectRoleAssertion:   p.ProjectRoleAssertion,
		ProjectRoleCheck:       p.ProjectRoleCheck,
		HasProjectCheck:        p.HasProjectCheck,
		PrivateLabelingSetting: managementv1.PrivateLabelingSetting(p.PrivateLabelingSetting),
	}
}

// AddProject creates a project; its name is unique in the organization.
func (s *Server) AddProject(ctx context.Context, req *managementv1.AddProjectRequest) (*managementv1.AddProjectResponse, error) {
	m := req
	lim, err := apierr.CheckLimits(m) // the maximum lengths and counts are in the proto
	if err != nil {
		return nil, err
	}
	var f apierr.Fields
	f.Check(lim.Length("name", "name", m.GetName(), 1))
	if _, ok := managementv1.PrivateLabelingSetting_name[int32(m.GetPrivateLabelingSetting())]; !ok {
		f.Add("private_labeling_setting", "must be a defined value")
	}
	lim.Rest(&f)
	if err := f.Err("PROJECT-invalid"); err != nil {
		return nil, err
	}
	c := authz.FromContext(ctx)
	id, evs, err := s.projectCommands().AddProject(ctx, c.UserID, c.OrgID, projects.ProjectAdded{
		Name:                   m.GetName(),
		ProjectRoleAssertion:   m.GetProjectRoleAssertion(),
		ProjectRoleCheck:       m.GetProjectRoleCheck(),
		HasProjectCheck:        m.GetHasProjectCheck(),
		PrivateLabelingSetting: int32(m.GetPrivateLabelingSetting()),
	})
	if err != nil {
		return nil, err
	}
	return &managementv1.AddProjectResponse{Id: id, Details: writeDetails(evs)}, nil
}

// GetProjectByID returns a project of the organization.
func (s *Server) GetProjectByID(ctx context.Context, req *managementv1.GetProjectByIDRequest) (*managementv1.GetProjectByIDResponse, error) {
	lim, err := apierr.CheckLimits(req) // the id's maximum length is in the proto
	if err != nil {
		return nil, err
	}
	var f apierr.Fields
	f.Check(lim.Length("id", "id", req.GetId(), 1))
	lim.Rest(&f)
	if err := f.Err("PROJECT-invalid-id"); err != nil {
		return nil, err
	}
	p, err := s.project(ctx, req.GetId())
	if err != nil {
		return nil, err
	}
	return &managementv1.GetProjectByIDResponse{Project: projectToProto(p)}, nil
}
