package management_test

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/gatehouse-id/gatehouse/pkg/db"
	managementv1 "github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/management/v1"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/mgmttest"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/orgs"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/projects"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/storetest"
)

func TestListProjects(t *testing.T) {
	storetest.Run(t, func(t *testing.T, d db.Dialect) {
		e := mgmttest.Start(t, d)
		ctx := context.Background()
		mine := map[string]string{}
		all := []string{"Portal", "Shop", "Shop Admin", "billing"} // bytewise
		for _, n := range all {
			mine[n] = appNewProject(t, e, e.AdminToken, "", n)
		}
		otherOrg, otherOwner := e.SeedOrg("Projects Elsewhere", "elsewhere")
		theirs := appNewProject(t, e, e.Intro.Mint(otherOwner), "", "Shop") // names are unique per organization only
		const path = "/management/v1/projects/_search"
		names := func(t *testing.T, token, org string, body any) []string {
			t.Helper()
			n, _ := lstList(t, e, path, token, org, body, "name")
			return n
		}

		t.Run("queries", func(t *testing.T) {
			for _, tc := range []struct {
				name    string
				queries []any
				want    []string
			}{
				{"none", nil, all},
				{"equals", []any{lstText("nameQuery", "name", "Shop", "TEXT_QUERY_METHOD_EQUALS")}, []string{"Shop"}},
				{"equals is case-sensitive", []any{lstText("nameQuery", "name", "shop", "TEXT_QUERY_METHOD_EQUALS")}, nil},
				{"equals ignoring case", []any{lstText("nameQuery", "name", "BILLING", "TEXT_QUERY_METHOD_EQUALS_IGNORE_CASE")}, []string{"billing"}},
				{"starts with", []any{lstText("nameQuery", "name", "Shop", "TEXT_QUERY_METHOD_STARTS_WITH")}, []string{"Shop", "Shop Admin"}},
				{"contains ignoring case", []any{lstText("nameQuery", "name", "O", "TEXT_QUERY_METHOD_CONTAINS_IGNORE_CASE")}, []string{"Portal", "Shop", "Shop Admin"}},
				{"all must match", []any{
					lstText("nameQuery", "name", "Shop", "TEXT_QUERY_METHOD_STARTS_WITH"),
					lstText("nameQuery", "name", "admin", "TEXT_QUERY_METHOD_ENDS_WITH_IGNORE_CASE"),
				}, []string{"Shop Admin"}},
			} {
				got, det := lstList(t, e, path, e.AdminToken, "", map[string]any{"query": map[string]any{"asc": true}, "queries": tc.queries}, "name")
				if !slices.Equal(got, tc.want) || det["totalResult"] != strconv.Itoa(len(tc.want)) {
					t.Errorf("%s: %v (total %v); want %v", tc.name, got, det["totalResult"], tc.want)
				}
			}
		})

		t.Run("organizations and roles", func(t *testing.T) {
			if got := names(t, e.Intro.Mint(otherOwner), "", map[string]any{}); !slices.Equal(got, []string{"Shop"}) {
				t.Fatalf("other organization's owner: %v; want its own project only", got)
			}
			r := e.REST("POST", path, e.AdminToken, otherOrg, map[string]any{})
			res, _ := r.JSON["result"].([]any)
			if r.Status != 200 || len(res) != 1 || res[0].(map[string]any)["id"] != theirs {
				t.Fatalf("IAM owner with x-service-orgid: %d %s; want the other organization's project", r.Status, r.Body)
			}
			usrRefused(t, e, "owner of another organization", "POST", path, e.Intro.Mint(otherOwner), e.OrgID, map[string]any{}, 403, 7)
			manager := e.SeedUser(e.OrgID, "pl-manager")
			e.SeedMember(e.OrgID, manager, orgs.RoleOrgUserManager)
			usrRefused(t, e, "user manager", "POST", path, e.Intro.Mint(manager), "", map[string]any{}, 403, 7)
		})

		t.Run("order, paging and details", func(t *testing.T) {
			desc := slices.Clone(all)
			slices.Reverse(desc)
			if got := names(t, e.AdminToken, "", map[string]any{}); !slices.Equal(got, desc) {
				t.Fatalf("default order %v; want descending by name %v", got, desc)
			}
			got, det := lstList(t, e, path, e.AdminToken, "", map[string]any{"query": map[string]any{"offset": "1", "limit": 2, "asc": true}}, "name")
			if !slices.Equal(got, all[1:3]) {
				t.Fatalf("offset 1 limit 2: %v; want %v", got, all[1:3])
			}
			seq, at := lstLastOfType(t, e, projects.Aggregate)
			lstWantDetails(t, "paged", det, len(all), seq, at)
		})

		t.Run("every protocol", func(t *testing.T) {
			for _, protocol := range mgmttest.Protocols {
				res, err := e.Client(protocol, e.AdminToken, "").ListProjects(ctx, &managementv1.ListProjectsRequest{
					Query: &managementv1.ListQuery{Limit: 1, Asc: true},
					Queries: []*managementv1.ProjectQuery{{Query: &managementv1.ProjectQuery_NameQuery{NameQuery: &managementv1.ProjectNameQuery{
						Name: "shop", Method: managementv1.TextQueryMethod_TEXT_QUERY_METHOD_STARTS_WITH_IGNORE_CASE}}}},
				})
				if err != nil {
					t.Fatalf("%s: %v", protocol, err)
				}
				m := res
				if len(m.GetResult()) != 1 || m.GetDetails().GetTotalResult() != 2 {
					t.Fatalf("%s: %v; want one of two", protocol, m)
				}
				p := m.GetResult()[0]
				want, err := e.Client(protocol, e.AdminToken, "").GetProjectByID(ctx, &managementv1.GetProjectByIDRequest{Id: mine["Shop"]})
				if err != nil {
					t.Fatal(err)
				}
				if !proto.Equal(p, want.GetProject()) {
					t.Fatalf("%s: listed %v; want what GetProjectByID returns, %v", protocol, p, want.GetProject())
				}
				evs := e.Events(p.GetId())
				usrWantRead(t, protocol+" project details", p.GetDetails(), evs[0], evs[len(evs)-1])
			}
		})

		t.Run("limits", func(t *testing.T) {
			q20 := make([]any, 20)
			for i := range q20 {
				q20[i] = lstText("nameQuery", "name", "", "TEXT_QUERY_METHOD_CONTAINS")
			}
			if got := names(t, e.AdminToken, "", map[string]any{"queries": q20}); len(got) != len(all) {
				t.Fatalf("20 queries: %v", got)
			}
			long := strings.Repeat("x", 200)
			if got := names(t, e.AdminToken, "", map[string]any{"queries": []any{lstText("nameQuery", "name", long, "TEXT_QUERY_METHOD_EQUALS")}}); len(got) != 0 {
				t.Fatalf("name of 200 characters: %v", got)
			}
			for _, tc := range []struct {
				name string
				body any
			}{
				{"limit 1001", map[string]any{"query": map[string]any{"limit": 1001}}},
				{"21 queries", map[string]any{"queries": append(q20, q20[0])}},
				{"name of 201 characters", map[string]any{"queries": []any{lstText("nameQuery", "name", long+"x", "TEXT_QUERY_METHOD_EQUALS")}}},
				{"undefined method", map[string]any{"queries": []any{map[string]any{"nameQuery": map[string]any{"name": "a", "method": 99}}}}},
				{"empty query", map[string]any{"queries": []any{map[string]any{}}}},
			} {
				usrRefused(t, e, tc.name, "POST", path, e.AdminToken, "", tc.body, 400, 3)
			}
		})
	})
}
