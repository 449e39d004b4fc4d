package management_test

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/gatehouse-id/gatehouse/pkg/db"
	managementv1 "github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/management/v1"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/eventstore"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/mgmttest"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/orgs"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/storetest"
)

func TestListOrgMembers(t *testing.T) {
	storetest.Run(t, func(t *testing.T, d db.Dialect) {
		e := mgmttest.Start(t, d)
		ctx := context.Background()
		otherOrg, otherOwner := e.SeedOrg("Members Elsewhere", "m-owner")
		added := map[string]eventstore.Event{} // user id -> its membership's event
		member := func(userID string, roles ...string) {
			e.SeedMember(e.OrgID, userID, roles...)
			added[userID] = usrLast(t, e, e.OrgID)
		}
		mia := e.SeedUser(e.OrgID, "mia")
		member(mia, orgs.RoleOrgUserManager)
		foreign := e.SeedUser(otherOrg, "foreign") // members may belong to another organization
		member(foreign, orgs.RoleOrgOwner, orgs.RoleOrgUserManager)
		r := e.REST("POST", "/management/v1/users/machine", e.AdminToken, "", map[string]any{"userName": "robot", "name": "Build Robot"})
		if r.Status != 200 {
			t.Fatalf("AddMachineUser: %d %s", r.Status, r.Body)
		}
		robot := appStr(r.JSON["userId"])
		member(robot, orgs.RoleOrgUserManager)
		e.SeedUser(e.OrgID, "not-a-member")
		all := []string{e.AdminID, mia, foreign, robot} // the admin owns the organization since SeedOrg
		slices.Sort(all)
		const path = "/management/v1/orgs/me/members/_search"
		ids := func(t *testing.T, token, org string, body any) ([]string, map[string]any) {
			t.Helper()
			return lstList(t, e, path, token, org, body, "userId")
		}

		t.Run("members of any organization, with their users", func(t *testing.T) {
			res, err := e.Client("grpc", e.AdminToken, "").ListOrgMembers(ctx, &managementv1.ListOrgMembersRequest{Query: &managementv1.ListQuery{Asc: true}})
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]*managementv1.Member{}
			var order []string
			for _, m := range res.GetResult() {
				got[m.GetUserId()] = m
				order = append(order, m.GetUserId())
			}
			if !slices.Equal(order, all) || res.GetDetails().GetTotalResult() != uint64(len(all)) {
				t.Fatalf("members %v; want %v", order, all)
			}
			m := got[mia]
			if !slices.Equal(m.GetRoles(), []string{orgs.RoleOrgUserManager}) || m.GetPreferredLoginName() != "mia@acme-corp.localhost" ||
				m.GetEmail() != "mia@example.com" || m.GetFirstName() != "Test" || m.GetLastName() != "mia" || m.GetDisplayName() != "Test mia" ||
				m.GetUserType() != managementv1.Type_TYPE_HUMAN || m.GetUserResourceOwner() != e.OrgID {
				t.Fatalf("mia = %v", m)
			}
			if m := got[foreign]; !slices.Equal(m.GetRoles(), []string{orgs.RoleOrgOwner, orgs.RoleOrgUserManager}) ||
				m.GetUserResourceOwner() != otherOrg || m.GetPreferredLoginName() != "foreign@members-elsewhere.localhost" {
				t.Fatalf("foreign = %v", m)
			}
			if m := got[robot]; m.GetUserType() != managementv1.Type_TYPE_MACHINE || m.GetDisplayName() != "Build Robot" || m.GetEmail() != "" {
				t.Fatalf("robot = %v", m)
			}
			for id, ev := range added {
				usrWantRead(t, "membership of "+id, got[id].GetDetails(), ev, ev)
				if got[id].GetDetails().GetResourceOwner() != e.OrgID {
					t.Fatalf("membership of %s owned by %s; want the organization", id, got[id].GetDetails().GetResourceOwner())
				}
			}
			last := usrLast(t, e, e.OrgID)
			if det := res.GetDetails(); det.GetProcessedSequence() != last.Sequence || !det.GetViewTimestamp().AsTime().Equal(last.CreatedAt) {
				t.Fatalf("details %v; want the organization's last event %d", det, last.Sequence)
			}
		})

		t.Run("queries", func(t *testing.T) {
			for _, tc := range []struct {
				name    string
				queries []any
				want    []string
			}{
				{"email", []any{lstText("emailQuery", "email", "mia@example.com", "TEXT_QUERY_METHOD_EQUALS")}, []string{mia}},
				{"last name ignoring case", []any{lstText("lastNameQuery", "lastName", "FOREIGN", "TEXT_QUERY_METHOD_EQUALS_IGNORE_CASE")}, []string{foreign}},
				{"first name (the machine has none)", []any{lstText("firstNameQuery", "firstName", "Test", "TEXT_QUERY_METHOD_EQUALS")}, []string{e.AdminID, mia, foreign}},
				{"user id", []any{map[string]any{"userIdQuery": map[string]any{"userId": robot}}}, []string{robot}},
				{"a non-member's id", []any{map[string]any{"userIdQuery": map[string]any{"userId": otherOwner}}}, nil},
				{"all must match", []any{
					lstText("emailQuery", "email", "@example.com", "TEXT_QUERY_METHOD_ENDS_WITH"),
					map[string]any{"userIdQuery": map[string]any{"userId": foreign}},
				}, []string{foreign}},
			} {
				want := slices.Clone(tc.want)
				slices.Sort(want)
				got, det := ids(t, e.AdminToken, "", map[string]any{"query": map[string]any{"asc": true}, "queries": tc.queries})
				if !slices.Equal(got, want) || det["totalResult"] != strconv.Itoa(len(want)) {
					t.Errorf("%s: %v (total %v); want %v", tc.name, got, det["totalResult"], want)
				}
			}
		})

		t.Run("order and paging", func(t *testing.T) {
			desc := slices.Clone(all)
			slices.Reverse(desc)
			if got, _ := ids(t, e.AdminToken, "", map[string]any{}); !slices.Equal(got, desc) {
				t.Fatalf("default order %v; want descending by user id %v", got, desc)
			}
			got, det := ids(t, e.AdminToken, "", map[string]any{"query": map[string]any{"offset": "1", "limit": 2, "asc": true}})
			if !slices.Equal(got, all[1:3]) || det["totalResult"] != strconv.Itoa(len(all)) {
				t.Fatalf("offset 1 limit 2: %v (total %v); want %v", got, det["totalResult"], all[1:3])
			}
		})

		t.Run("organizations and roles", func(t *testing.T) {
			if got, _ := ids(t, e.Intro.Mint(otherOwner), "", map[string]any{}); !slices.Equal(got, []string{otherOwner}) {
				t.Fatalf("other organization's owner: %v; want its own members only", got)
			}
			if got, _ := ids(t, e.AdminToken, otherOrg, map[string]any{}); !slices.Equal(got, []string{otherOwner}) {
				t.Fatalf("IAM owner with x-service-orgid: %v", got)
			}
			// foreign owns our organization: it lists our members from its own.
			if got, _ := ids(t, e.Intro.Mint(foreign), e.OrgID, map[string]any{"query": map[string]any{"asc": true}}); !slices.Equal(got, all) {
				t.Fatalf("an owner from another organization: %v", got)
			}
			usrRefused(t, e, "owner of another organization", "POST", path, e.Intro.Mint(otherOwner), e.OrgID, map[string]any{}, 403, 7)
			usrRefused(t, e, "user manager", "POST", path, e.Intro.Mint(mia), "", map[string]any{}, 403, 7)
			usrRefused(t, e, "user without roles", "POST", path, e.Intro.Mint(e.SeedUser(e.OrgID, "ml-plain")), "", map[string]any{}, 403, 7)
		})

		t.Run("removed members and users are gone", func(t *testing.T) {
			if r := e.REST("DELETE", "/management/v1/orgs/me/members/"+mia, e.AdminToken, "", nil); r.Status != 200 {
				t.Fatalf("RemoveOrgMember: %d %s", r.Status, r.Body)
			}
			if r := e.REST("DELETE", "/management/v1/users/"+robot, e.AdminToken, "", nil); r.Status != 200 {
				t.Fatalf("RemoveUser: %d %s", r.Status, r.Body)
			}
			want := []string{e.AdminID, foreign}
			slices.Sort(want)
			if got, _ := ids(t, e.AdminToken, "", map[string]any{"query": map[string]any{"asc": true}}); !slices.Equal(got, want) {
				t.Fatalf("after removals: %v; want %v", got, want)
			}
		})

		t.Run("limits", func(t *testing.T) {
			q20 := make([]any, 20)
			for i := range q20 {
				q20[i] = lstText("emailQuery", "email", "", "TEXT_QUERY_METHOD_CONTAINS")
			}
			if got, _ := ids(t, e.AdminToken, "", map[string]any{"queries": q20}); len(got) != 2 {
				t.Fatalf("20 queries: %v", got)
			}
			long := strings.Repeat("x", 201)
			for _, tc := range []struct {
				name string
				body any
			}{
				{"limit 1001", map[string]any{"query": map[string]any{"limit": 1001}}},
				{"21 queries", map[string]any{"queries": append(q20, q20[0])}},
				{"email of 201 characters", map[string]any{"queries": []any{lstText("emailQuery", "email", long, "TEXT_QUERY_METHOD_EQUALS")}}},
				{"first name of 201 characters", map[string]any{"queries": []any{lstText("firstNameQuery", "firstName", long, "TEXT_QUERY_METHOD_EQUALS")}}},
				{"last name of 201 characters", map[string]any{"queries": []any{lstText("lastNameQuery", "lastName", long, "TEXT_QUERY_METHOD_EQUALS")}}},
				{"user id of 201 characters", map[string]any{"queries": []any{map[string]any{"userIdQuery": map[string]any{"userId": long}}}}},
				{"undefined method", map[string]any{"queries": []any{map[string]any{"emailQuery": map[string]any{"email": "a", "method": 99}}}}},
				{"empty query", map[string]any{"queries": []any{map[string]any{}}}},
			} {
				usrRefused(t, e, tc.name, "POST", path, e.AdminToken, "", tc.body, 400, 3)
			}
		})
	})
}
