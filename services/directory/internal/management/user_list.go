package management

import (
	"context"
	"fmt"
	"math"

	"google.golang.org/protobuf/types/known/timestamppb"

	managementv1 "github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/management/v1"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/apierr"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/authz"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/textquery"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/users"
)

// userListDefaultLimit is the page size of a ListQuery whose limit is 0.
const userListDefaultLimit = 100

// usersPage validates a ListQuery: limit 0 means the default of 100, more
// than 1000 (ListQuery.limit's uint32.lte rule, in lim) is InvalidArgument.
func usersPage(f *apierr.Fields, lim *apierr.Limits, q *managementv1.ListQuery) users.Page {
	p := users.Page{Offset: q.GetOffset(), Limit: uint64(q.GetLimit()), Asc: q.GetAsc()}
	if p.Limit == 0 {
		p.Limit = userListDefaultLimit
	}
	f.Check(lim.Max("query.limit", "query.limit"))
	if p.Offset > math.MaxInt64 {
		f.Add("query.offset", "is too large")
	}
	return p
}

// usersListDetails are the details of a list of user projections: the
// count and the last event reduced into them.
func (s *Server) usersListDetails(ctx context.Context, total uint64) (*managementv1.ListDetails, error) {
	seq, ts, err := s.Users.Processed(ctx)
	if err != nil {
		return nil, err
	}
	return &managementv1.ListDetails{TotalResult: total, ProcessedSequence: seq, ViewTimestamp: timestamppb.New(ts)}, nil
}

// ListUsers lists the organization's users matching every query.
func (s *Server) ListUsers(ctx context.Context, req *managementv1.ListUsersRequest) (*managementv1.ListUsersResponse, error) {
	m := req
	lim, err := apierr.CheckLimits(m) // the maximum lengths and counts are in the proto
	if err != nil {
		return nil, err
	}
	var f apierr.Fields
	search := users.Search{
		OrgID: authz.FromContext(ctx).OrgID,
		Sort:  users.SortColumn(m.GetSortingColumn()),
		Page:  usersPage(&f, lim, m.GetQuery()),
	}
	if !users.ValidSort(search.Sort) {
		f.Add("sorting_column", "is not a defined value")
	}
	f.Check(lim.Count("queries", "queries"))
	for i, q := range m.GetQueries() {
		if qu, ok := userQuery(&f, lim, fmt.Sprintf("queries[%d]", i), q); ok {
			search.Queries = append(search.Queries, qu)
		}
	}
	lim.Rest(&f)
	if err := f.Err("USER-invalid-query"); err != nil {
		return nil, err
	}
	list, total, err := s.Users.Search(ctx, search)
	if err != nil {
		return nil, err
	}
	details, err := s.usersListDetails(ctx, total)
	if err != nil {
		return nil, err
	}
	out := &managementv1.ListUsersResponse{Details: details, SortingColumn: m.GetSortingColumn(), Result: make([]*managementv1.User, len(list))}
	for i := range list {
		out.Result[i] = userToProto(&list[i])
	}
	return out, nil
}

// userQuery validates one UserQuery and translates it; its texts' maximum
// length (200) is the string.max_len rule of their query messages.
func userQuery(f *apierr.Fields, lim *apierr.Limits, field string, q *managementv1.UserQuery) (users.Query, bool) {
	text := func(name string, qf users.QueryField, value string, method managementv1.TextQueryMethod) (users.Query, bool) {
		ok := true
		if e := lim.Length(field+"."+name, field+"."+name, value, 0); e != nil {
			f.Check(e)
			ok = false
		}
		if !textquery.Method(method).Valid() {
			f.Add(field+".method", "is not a defined value")
			ok = false
		}
		return users.Query{Field: qf, Text: value, Method: textquery.Method(method)}, ok
	}
	switch x := q.GetQuery().(type) {
	case *managementv1.UserQuery_UserNameQuery:
		return text("user_name_query.user_name", users.QueryUserName, x.UserNameQuery.GetUserName(), x.UserNameQuery.GetMethod())
	case *managementv1.UserQuery_EmailQuery:
		return text("email_query.email_address", users.QueryEmail, x.EmailQuery.GetEmailAddress(), x.EmailQuery.GetMethod())
	case *managementv1.UserQuery_LoginNameQuery:
		return text("login_name_query.login_name", users.QueryLoginName, x.LoginNameQuery.GetLoginName(), x.LoginNameQuery.GetMethod())
	case *managementv1.UserQuery_StateQuery:
		st := x.StateQuery.GetState()
		if _, ok := managementv1.UserState_name[int32(st)]; !ok {
			f.Add(field+".state_query.state", "is not a defined value")
			return users.Query{}, false
		}
		return users.Query{Field: users.QueryState, Value: int32(st)}, true
	case *managementv1.UserQuery_TypeQuery:
		t := x.TypeQuery.GetType()
		if t != managementv1.Type_TYPE_HUMAN && t != managementv1.Type_TYPE_MACHINE {
			f.Add(field+".type_query.type", "must be TYPE_HUMAN or TYPE_MACHINE")
			return users.Query{}, false
		}
		return users.Query{Field: users.QueryType, Value: int32(t)}, true
	}
	f.Add(field, "must set exactly one query")
	return users.Query{}, false
}
