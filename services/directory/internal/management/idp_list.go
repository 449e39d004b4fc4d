package management

import (
	"context"
	"fmt"

	"google.golang.org/protobuf/types/known/timestamppb"

	managementv1 "github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/management/v1"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/apierr"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/authz"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/idps"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/textquery"
)

// defaultListLimit is the page size of a ListQuery whose limit is 0; the
// maximums of ListQuery and ListOrgIDPsRequest are protovalidate rules.
const defaultListLimit = 100

// ListOrgIDPs lists the organization's identity providers matching every
// query, ordered by name (descending unless query.asc), one page at a time.
func (s *Server) ListOrgIDPs(ctx context.Context, req *managementv1.ListOrgIDPsRequest) (*managementv1.ListOrgIDPsResponse, error) {
	m := req
	search, err := idpSearch(m)
	if err != nil {
		return nil, err
	}
	q := s.idpQueries()
	page, total, err := q.Search(ctx, authz.FromContext(ctx).OrgID, search)
	if err != nil {
		return nil, err
	}
	seq, at, err := q.Processed(ctx)
	if err != nil {
		return nil, err
	}
	res := &managementv1.ListOrgIDPsResponse{
		Details:       &managementv1.ListDetails{TotalResult: total, ProcessedSequence: seq},
		SortingColumn: m.GetSortingColumn(),
		Result:        make([]*managementv1.IDP, len(page)),
	}
	if !at.IsZero() {
		res.Details.ViewTimestamp = timestamppb.New(at)
	}
	for i, p := range page {
		res.Result[i] = idpToProto(p)
	}
	return res, nil
}

// idpSearch validates a list request and translates it.
func idpSearch(m *managementv1.ListOrgIDPsRequest) (idps.Search, error) {
	lim, err := apierr.CheckLimits(m) // the maximum lengths and counts are in the proto
	if err != nil {
		return idps.Search{}, err
	}
	var f apierr.Fields
	lq := m.GetQuery()
	s := idps.Search{Offset: lq.GetOffset(), Limit: int(lq.GetLimit()), Asc: lq.GetAsc()}
	if s.Limit == 0 {
		s.Limit = defaultListLimit
	}
	f.Check(lim.Max("query.limit", "query.limit"))
	checkEnum(&f, "sorting_column", int32(m.GetSortingColumn()), managementv1.IDPFieldName_name)
	f.Check(lim.Count("queries", "queries"))
	for i, q := range m.GetQueries() {
		field := fmt.Sprintf("queries[%d]", i)
		switch {
		case q.GetIdpIdQuery() != nil:
			f.Check(lim.Length(field+".idp_id_query.id", field+".idp_id_query.id", q.GetIdpIdQuery().GetId(), 0))
			s.IDs = append(s.IDs, q.GetIdpIdQuery().GetId())
		case q.GetIdpNameQuery() != nil:
			nq := q.GetIdpNameQuery()
			f.Check(lim.Length(field+".idp_name_query.name", field+".idp_name_query.name", nq.GetName(), 0))
			method := textquery.Method(nq.GetMethod())
			if !method.Valid() {
				f.Add(field+".idp_name_query.method", "is not a defined value")
			}
			s.Names = append(s.Names, idps.NameQuery{Name: nq.GetName(), Method: method})
		case q.GetOwnerTypeQuery() != nil:
			ot := q.GetOwnerTypeQuery().GetOwnerType()
			checkEnum(&f, field+".owner_type_query.owner_type", int32(ot), managementv1.IDPOwnerType_name)
			s.OwnerTypes = append(s.OwnerTypes, int32(ot))
		default:
			f.Add(field, "must set exactly one query")
		}
	}
	lim.Rest(&f)
	return s, f.Err("IDP-invalid-query")
}
