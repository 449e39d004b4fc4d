package management

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/gatehouse-id/gatehouse/pkg/db"
	managementv1 "github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/management/v1"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/apierr"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/authz"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/orgs"
)

// ListOrgs lists the organizations in which the caller holds a role (every
// one for an IAM owner). Its rule (authz.OrgNone) checks no role, so this
// filter is the whole authorization: a caller without roles gets nothing.
func (s *Server) ListOrgs(ctx context.Context, req *managementv1.ListOrgsRequest) (*managementv1.ListOrgsResponse, error) {
	m := req
	lim, err := apierr.CheckLimits(m) // the maximum lengths and counts are in the proto
	if err != nil {
		return nil, err
	}
	var f apierr.Fields
	page := usersPage(&f, lim, m.GetQuery())
	checkEnum(&f, "sorting_column", int32(m.GetSortingColumn()), managementv1.OrgFieldName_name)
	checkQueryCount(&f, lim)
	var c criteria[orgs.Org]
	for i, q := range m.GetQueries() {
		field := fmt.Sprintf("queries[%d]", i)
		switch x := q.GetQuery().(type) {
		case *managementv1.OrgQuery_NameQuery:
			c.text(&f, lim, field+".name_query", "name", x.NameQuery.GetName(), x.NameQuery.GetMethod(), func(o orgs.Org) string { return o.Name })
		case *managementv1.OrgQuery_DomainQuery:
			c.text(&f, lim, field+".domain_query", "domain", x.DomainQuery.GetDomain(), x.DomainQuery.GetMethod(), func(o orgs.Org) string { return o.PrimaryDomain })
		case *managementv1.OrgQuery_StateQuery:
			st := x.StateQuery.GetState()
			checkEnum(&f, field+".state_query.state", int32(st), managementv1.OrgState_name)
			c = append(c, func(o orgs.Org) bool { return o.State == int32(st) })
		case *managementv1.OrgQuery_IdQuery:
			id := x.IdQuery.GetId()
			f.Check(lim.Length(field+".id_query.id", field+".id_query.id", id, 0))
			c = append(c, func(o orgs.Org) bool { return o.ID == id })
		default:
			f.Add(field, "must set exactly one query")
		}
	}
	lim.Rest(&f)
	if err := f.Err("ORG-invalid-query"); err != nil {
		return nil, err
	}
	visible, err := s.visibleOrgs(ctx, authz.FromContext(ctx).UserID)
	if err != nil {
		return nil, err
	}
	list, total := c.page(visible, func(a, b orgs.Org) int {
		return cmp.Or(strings.Compare(a.Name, b.Name), strings.Compare(a.ID, b.ID))
	}, page)
	seq, at, err := s.ES.LastOfType(ctx, orgs.AggregateOrg)
	if err != nil {
		return nil, err
	}
	out := &managementv1.ListOrgsResponse{
		Details:       &managementv1.ListDetails{TotalResult: total, ProcessedSequence: seq},
		SortingColumn: m.GetSortingColumn(),
		Result:        make([]*managementv1.Org, len(list)),
	}
	if !at.IsZero() {
		out.Details.ViewTimestamp = timestamppb.New(at)
	}
	for i := range list {
		out.Result[i] = orgToProto(&list[i])
	}
	return out, nil
}

// visibleOrgs returns the organizations in which userID holds a role:
// every one for an IAM owner.
func (s *Server) visibleOrgs(ctx context.Context, userID string) ([]orgs.Org, error) {
	inst, err := s.Orgs.InstanceRoles(ctx, userID)
	if err != nil {
		return nil, err
	}
	if slices.Contains(inst, orgs.RoleIAMOwner) {
		return s.Orgs.All(ctx)
	}
	ms, err := s.Orgs.Memberships(ctx, userID)
	if err != nil {
		return nil, err
	}
	out := make([]orgs.Org, 0, len(ms))
	for _, m := range ms {
		if len(m.Roles()) == 0 {
			continue
		}
		o, err := s.Orgs.Get(ctx, m.OrgID)
		if errors.Is(err, db.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		out = append(out, *o)
	}
	return out, nil
}
