package management

import (
	"cmp"
	"context"
	"fmt"
	"strings"

	"google.golang.org/protobuf/types/known/timestamppb"

	managementv1 "github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/management/v1"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/apierr"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/projects"
)

// ListApps lists the applications of a project of the organization
// matching every query, ordered by name, without secrets. A project of
// another organization is NotFound, as for GetAppByID.
func (s *Server) ListApps(ctx context.Context, req *managementv1.ListAppsRequest) (*managementv1.ListAppsResponse, error) {
	m := req
	lim, err := apierr.CheckLimits(m) // the maximum lengths and counts are in the proto
	if err != nil {
		return nil, err
	}
	var f apierr.Fields
	f.Check(lim.Length("project_id", "project_id", m.GetProjectId(), 1))
	page := usersPage(&f, lim, m.GetQuery())
	checkQueryCount(&f, lim)
	var c criteria[projects.App]
	for i, q := range m.GetQueries() {
		field := fmt.Sprintf("queries[%d]", i)
		switch x := q.GetQuery().(type) {
		case *managementv1.AppQuery_NameQuery:
			c.text(&f, lim, field+".name_query", "name", x.NameQuery.GetName(), x.NameQuery.GetMethod(), func(a projects.App) string { return a.Name })
		default:
			f.Add(field, "must set exactly one query")
		}
	}
	lim.Rest(&f)
	if err := f.Err("APP-invalid-query"); err != nil {
		return nil, err
	}
	p, err := s.project(ctx, m.GetProjectId())
	if err != nil {
		return nil, err
	}
	all, err := s.projectQueries().Apps(ctx, p.ID)
	if err != nil {
		return nil, err
	}
	list, total := c.page(all, func(a, b projects.App) int {
		return cmp.Or(strings.Compare(a.Name, b.Name), strings.Compare(a.ID, b.ID))
	}, page)
	// Apps are events of their project's aggregate: its last event is the
	// last one reduced into them.
	seq, at, err := s.projectQueries().LastEvent(ctx, p.ID)
	if err != nil {
		return nil, err
	}
	out := &managementv1.ListAppsResponse{
		Details: &managementv1.ListDetails{TotalResult: total, ProcessedSequence: seq, ViewTimestamp: timestamppb.New(at)},
		Result:  make([]*managementv1.App, len(list)),
	}
	for i := range list {
		out.Result[i] = appToProto(&list[i])
	}
	return out, nil
}
