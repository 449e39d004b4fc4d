package management

import (
	"cmp"
	"context"
	"fmt"
	"strings"

	"google.golang.org/protobuf/types/known/timestamppb"

	managementv1 "github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/management/v1"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/apierr"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/authz"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/projects"
)

// ListProjects lists the organization's projects matching every query,
// ordered by name.
func (s *Server) ListProjects(ctx context.Context, req *managementv1.ListProjectsRequest) (*managementv1.ListProjectsResponse, error) {
	m := req
	lim, err := apierr.CheckLimits(m) // the maximum lengths and counts are in the proto
	if err != nil {
		return nil, err
	}
	var f apierr.Fields
	page := usersPage(&f, lim, m.GetQuery())
	checkQueryCount(&f, lim)
	var c criteria[projects.Project]
	for i, q := range m.GetQueries() {
		field := fmt.Sprintf("queries[%d]", i)
		switch x := q.GetQuery().(type) {
		case *managementv1.ProjectQuery_NameQuery:
			c.text(&f, lim, field+".name_query", "name", x.NameQuery.GetName(), x.NameQuery.GetMethod(), func(p projects.Project) string { return p.Name })
		default:
			f.Add(field, "must set exactly one query")
		}
	}
	lim.Rest(&f)
	if err := f.Err("PROJECT-invalid-query"); err != nil {
		return nil, err
	}
	all, err := s.projectQueries().Projects(ctx, authz.FromContext(ctx).OrgID)
	if err != nil {
		return nil, err
	}
	list, total := c.page(all, func(a, b projects.Project) int {
		return cmp.Or(strings.Compare(a.Name, b.Name), strings.Compare(a.ID, b.ID))
	}, page)
	seq, at, err := s.ES.LastOfType(ctx, projects.Aggregate)
	if err != nil {
		return nil, err
	}
	out := &managementv1.ListProjectsResponse{
		Details: &managementv1.ListDetails{TotalResult: total, ProcessedSequence: seq},
		Result:  make([]*managementv1.Project, len(list)),
	}
	if !at.IsZero() {
		out.Details.ViewTimestamp = timestamppb.New(at)
	}
	for i := range list {
		out.Result[i] = projectToProto(&list[i])
	}
	return out, nil
}
