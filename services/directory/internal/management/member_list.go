package management

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/gatehouse-id/gatehouse/pkg/db"
	managementv1 "github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/management/v1"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/apierr"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/orgs"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/users"
)

// member is a membership with its user, as ListOrgMembers filters it.
type member struct {
	m orgs.Member
	u *users.User
}

// ListOrgMembers lists the organization's members (of any organization)
// matching every query, ordered by user id.
func (s *Server) ListOrgMembers(ctx context.Context, req *managementv1.ListOrgMembersRequest) (*managementv1.ListOrgMembersResponse, error) {
	m := req
	lim, err := apierr.CheckLimits(m) // the maximum lengths and counts are in the proto
	if err != nil {
		return nil, err
	}
	var f apierr.Fields
	page := usersPage(&f, lim, m.GetQuery())
	checkQueryCount(&f, lim)
	var c criteria[member]
	for i, q := range m.GetQueries() {
		field := fmt.Sprintf("queries[%d]", i)
		switch x := q.GetQuery().(type) {
		case *managementv1.MemberQuery_FirstNameQuery:
			c.text(&f, lim, field+".first_name_query", "first_name", x.FirstNameQuery.GetFirstName(), x.FirstNameQuery.GetMethod(), func(m member) string { return m.u.FirstName })
		case *managementv1.MemberQuery_LastNameQuery:
			c.text(&f, lim, field+".last_name_query", "last_name", x.LastNameQuery.GetLastName(), x.LastNameQuery.GetMethod(), func(m member) string { return m.u.LastName })
		case *managementv1.MemberQuery_EmailQuery:
			c.text(&f, lim, field+".email_query", "email", x.EmailQuery.GetEmail(), x.EmailQuery.GetMethod(), func(m member) string { return m.u.Email })
		case *managementv1.MemberQuery_UserIdQuery:
			id := x.UserIdQuery.GetUserId()
			f.Check(lim.Length(field+".user_id_query.user_id", field+".user_id_query.user_id", id, 0))
			c = append(c, func(m member) bool { return m.m.UserID == id })
		default:
			f.Add(field, "must set exactly one query")
		}
	}
	lim.Rest(&f)
	if err := f.Err("MEMBER-invalid-query"); err != nil {
		return nil, err
	}
	org, err := s.org(ctx)
	if err != nil {
		return nil, err
	}
	rows, err := s.Orgs.Members(ctx, org.ID)
	if err != nil {
		return nil, err
	}
	all := make([]member, 0, len(rows))
	for _, r := range rows {
		u, err := s.Users.Get(ctx, r.UserID)
		if errors.Is(err, db.ErrNotFound) {
			continue // removed in the meantime: removal ends memberships too
		}
		if err != nil {
			return nil, err
		}
		all = append(all, member{m: r, u: u})
	}
	list, total := c.page(all, func(a, b member) int { return strings.Compare(a.m.UserID, b.m.UserID) }, page)
	// Memberships are events of the organization's aggregate, so its last
	// event is the last one reduced into them.
	out := &managementv1.ListOrgMembersResponse{
		Details: &managementv1.ListDetails{TotalResult: total, ProcessedSequence: org.Sequence, ViewTimestamp: timestamppb.New(org.ChangeDate)},
		Result:  make([]*managementv1.Member, len(list)),
	}
	for i, x := range list {
		out.Result[i] = memberToProto(x)
	}
	return out, nil
}

func memberToProto(x member) *managementv1.Member {
	out := &managementv1.Member{
		UserId:             x.m.UserID,
		Details:            readDetails(x.m.CreationDate, x.m.ChangeDate, x.m.Sequence, x.m.OrgID),
		Roles:              x.m.Roles(),
		PreferredLoginName: x.u.LoginName(),
		UserResourceOwner:  x.u.OrgID,
		UserType:           managementv1.Type_TYPE_HUMAN,
		Email:              x.u.Email,
		FirstName:          x.u.FirstName,
		LastName:           x.u.LastName,
		DisplayName:        x.u.DisplayName,
	}
	if x.u.Type == users.TypeMachine {
		out.UserType = managementv1.Type_TYPE_MACHINE
		out.DisplayName = x.u.MachineName
	}
	return out
}
