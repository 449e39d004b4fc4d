package management_test

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/gatehouse-id/gatehouse/pkg/db"
	managementv1 "github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/management/v1"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/authz"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/mgmttest"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/orgs"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/storetest"
)

// TestListOrgs: each caller sees exactly the organizations where it holds a
// role (an IAM owner all of them), whatever x-service-orgid says; queries,
// order and paging apply to that set only.
func TestListOrgs(t *testing.T) {
	storetest.Run(t, func(t *testing.T, d db.Dialect) {
		e := mgmttest.Start(t, d)
		ctx := context.Background()
		beta, betaOwner := e.SeedOrg("Beta Org", "beta-owner")
		gamma, gammaOwner := e.SeedOrg("Gamma Org", "gamma-owner")
		e.SeedMember(gamma, betaOwner, orgs.RoleOrgUserManager)
		plain := e.SeedUser(e.OrgID, "plain")
		manager := e.SeedUser(e.OrgID, "manager")
		e.SeedMember(e.OrgID, manager, orgs.RoleOrgUserManager)
		// Bytewise by name; "Gatehouse" is the organization of first start.
		all := []string{"Acme Corp", "Beta Org", "Gamma Org", "Gatehouse"}
		const path = "/management/v1/orgs/_search"
		asc := map[string]any{"query": map[string]any{"asc": true}}
		names := func(t *testing.T, token, org string, body any) []string {
			t.Helper()
			n, _ := lstList(t, e, path, token, org, body, "name")
			return n
		}

		t.Run("each caller sees where it holds a role", func(t *testing.T) {
			for _, tc := range []struct {
				name, token string
				want        []string
			}{
				{"IAM owner", e.AdminToken, all},
				{"owner of one, user manager of another", e.Intro.Mint(betaOwner), []string{"Beta Org", "Gamma Org"}},
				{"owner of one", e.Intro.Mint(gammaOwner), []string{"Gamma Org"}},
				{"user manager", e.Intro.Mint(manager), []string{"Acme Corp"}},
				{"user without roles", e.Intro.Mint(plain), nil},
			} {
				// x-service-orgid is ignored: naming an organization where
				// the caller has no role is no error and widens nothing.
				for _, org := range []string{"", e.OrgID, beta, "no-such-org"} {
					got, det := lstList(t, e, path, tc.token, org, asc, "name")
					if !slices.Equal(got, tc.want) || det["totalResult"] != strconv.Itoa(len(tc.want)) {
						t.Errorf("%s, x-service-orgid %q: %v (total %v); want %v", tc.name, org, got, det["totalResult"], tc.want)
					}
				}
			}
		})

		t.Run("the token is checked as everywhere", func(t *testing.T) {
			for _, tc := range []struct{ name, token string }{
				{"expired token", e.Intro.MintWith(betaOwner, []string{authz.Audience}, -time.Minute)},
				{"token without the management audience", e.Intro.MintWith(betaOwner, []string{"other-api"}, time.Hour)},
				{"unknown token", "not-a-token"},
			} {
				usrRefused(t, e, tc.name, "POST", path, tc.token, "", map[string]any{}, 401, 16)
			}
			if r := e.REST("POST", path, "", "", map[string]any{}); r.Status != 401 {
				t.Fatalf("no token: %d; want 401", r.Status)
			}
			revoked := e.Intro.Mint(gammaOwner)
			e.Intro.Revoke(revoked)
			usrRefused(t, e, "revoked token", "POST", path, revoked, "", map[string]any{}, 401, 16)
		})

		t.Run("queries", func(t *testing.T) {
			for _, tc := range []struct {
				name    string
				token   string
				queries []any
				want    []string
			}{
				{"name equals", e.AdminToken, []any{lstText("nameQuery", "name", "Beta Org", "TEXT_QUERY_METHOD_EQUALS")}, []string{"Beta Org"}},
				{"default method is equals", e.AdminToken, []any{map[string]any{"nameQuery": map[string]any{"name": "Beta Org"}}}, []string{"Beta Org"}},
				{"equals is case-sensitive", e.AdminToken, []any{lstText("nameQuery", "name", "beta org", "TEXT_QUERY_METHOD_EQUALS")}, nil},
				{"equals ignoring case", e.AdminToken, []any{lstText("nameQuery", "name", "BETA ORG", "TEXT_QUERY_METHOD_EQUALS_IGNORE_CASE")}, []string{"Beta Org"}},
				{"contains ignoring case", e.AdminToken, []any{lstText("nameQuery", "name", "ORG", "TEXT_QUERY_METHOD_CONTAINS_IGNORE_CASE")}, []string{"Beta Org", "Gamma Org"}},
				{"domain", e.AdminToken, []any{lstText("domainQuery", "domain", "gamma-org.localhost", "TEXT_QUERY_METHOD_EQUALS")}, []string{"Gamma Org"}},
				{"domain ends with", e.AdminToken, []any{lstText("domainQuery", "domain", ".LOCALHOST", "TEXT_QUERY_METHOD_ENDS_WITH_IGNORE_CASE")}, all},
				{"state active", e.AdminToken, []any{map[string]any{"stateQuery": map[string]any{"state": "ORG_STATE_ACTIVE"}}}, all},
				{"state inactive", e.AdminToken, []any{map[string]any{"stateQuery": map[string]any{"state": "ORG_STATE_INACTIVE"}}}, nil},
				{"id", e.AdminToken, []any{map[string]any{"idQuery": map[string]any{"id": gamma}}}, []string{"Gamma Org"}},
				{"all queries must match", e.AdminToken, []any{
					lstText("nameQuery", "name", "org", "TEXT_QUERY_METHOD_CONTAINS_IGNORE_CASE"),
					map[string]any{"idQuery": map[string]any{"id": beta}},
				}, []string{"Beta Org"}},
				// Queries select among the visible organizations only.
				{"another's organization by name", e.Intro.Mint(gammaOwner), []any{lstText("nameQuery", "name", "Beta Org", "TEXT_QUERY_METHOD_EQUALS")}, nil},
				{"another's organization by id", e.Intro.Mint(gammaOwner), []any{map[string]any{"idQuery": map[string]any{"id": beta}}}, nil},
			} {
				got, det := lstList(t, e, path, tc.token, "", map[string]any{"query": map[string]any{"asc": true}, "queries": tc.queries}, "name")
				if !slices.Equal(got, tc.want) || det["totalResult"] != strconv.Itoa(len(tc.want)) {
					t.Errorf("%s: %v (total %v); want %v", tc.name, got, det["totalResult"], tc.want)
				}
			}
		})

		t.Run("order, paging and details", func(t *testing.T) {
			desc := slices.Clone(all)
			slices.Reverse(desc)
			if got := names(t, e.AdminToken, "", map[string]any{}); !slices.Equal(got, desc) {
				t.Fatalf("default order %v; want descending by name %v", got, desc)
			}
			got, det := lstList(t, e, path, e.AdminToken, "", map[string]any{"query": map[string]any{"offset": "1", "limit": 2, "asc": true}}, "name")
			seq, at := lstLastOfType(t, e, orgs.AggregateOrg)
			if !slices.Equal(got, all[1:3]) {
				t.Fatalf("offset 1 limit 2: %v; want %v", got, all[1:3])
			}
			lstWantDetails(t, "paged", det, len(all), seq, at)
			if got := names(t, e.AdminToken, "", map[string]any{"query": map[string]any{"offset": "4"}}); len(got) != 0 {
				t.Fatalf("offset past the end: %v", got)
			}
			r := e.REST("POST", path, e.AdminToken, "", map[string]any{"sortingColumn": "ORG_FIELD_NAME_NAME", "query": map[string]any{"asc": true}})
			if r.JSON["sortingColumn"] != "ORG_FIELD_NAME_NAME" {
				t.Fatalf("sortingColumn echoed as %v", r.JSON["sortingColumn"])
			}
			// A membership change is an org event: the details follow it.
			e.SeedMember(beta, plain, orgs.RoleOrgOwner)
			got, det = lstList(t, e, path, e.Intro.Mint(plain), "", map[string]any{}, "name")
			seq, at = lstLastOfType(t, e, orgs.AggregateOrg)
			if !slices.Equal(got, []string{"Beta Org"}) {
				t.Fatalf("after being made an owner: %v", got)
			}
			lstWantDetails(t, "after a membership", det, 1, seq, at)
		})

		t.Run("every protocol", func(t *testing.T) {
			for _, proto := range mgmttest.Protocols {
				res, err := e.Client(proto, e.Intro.Mint(betaOwner), e.OrgID).ListOrgs(ctx, &managementv1.ListOrgsRequest{
					Query: &managementv1.ListQuery{Limit: 1},
				})
				if err != nil {
					t.Fatalf("%s: %v", proto, err)
				}
				m := res
				if len(m.GetResult()) != 1 || m.GetDetails().GetTotalResult() != 2 {
					t.Fatalf("%s: %v; want one of two", proto, m)
				}
				o := m.GetResult()[0]
				evs := e.Events(gamma)
				if o.GetId() != gamma || o.GetName() != "Gamma Org" || o.GetPrimaryDomain() != "gamma-org.localhost" || o.GetState() != managementv1.OrgState_ORG_STATE_ACTIVE {
					t.Fatalf("%s: org %v; want Gamma Org", proto, o)
				}
				usrWantRead(t, proto+" org details", o.GetDetails(), evs[0], evs[len(evs)-1])
			}
			_, err := e.Client("grpc", e.AdminToken, "").ListOrgs(ctx, &managementv1.ListOrgsRequest{Query: &managementv1.ListQuery{Limit: 1001}})
			if connect.CodeOf(err) != connect.CodeInvalidArgument {
				t.Fatalf("limit 1001 over gRPC: %v; want InvalidArgument", err)
			}
			_, err = e.Client("grpc-web", "", "").ListOrgs(ctx, &managementv1.ListOrgsRequest{})
			if connect.CodeOf(err) != connect.CodeUnauthenticated {
				t.Fatalf("no token over gRPC-web: %v; want Unauthenticated", err)
			}
		})

		t.Run("limits", func(t *testing.T) {
			q20 := make([]any, 20)
			for i := range q20 {
				q20[i] = lstText("nameQuery", "name", "a", "TEXT_QUERY_METHOD_CONTAINS_IGNORE_CASE")
			}
			if got := names(t, e.AdminToken, "", map[string]any{"queries": q20}); len(got) != len(all) {
				t.Fatalf("20 queries: %v", got)
			}
			long := strings.Repeat("x", 200)
			if got := names(t, e.AdminToken, "", map[string]any{"queries": []any{lstText("nameQuery", "name", long, "TEXT_QUERY_METHOD_CONTAINS")}}); len(got) != 0 {
				t.Fatalf("name of 200 characters: %v", got)
			}
			for _, tc := range []struct {
				name string
				body any
			}{
				{"limit 1001", map[string]any{"query": map[string]any{"limit": 1001}}},
				{"21 queries", map[string]any{"queries": append(q20, q20[0])}},
				{"name of 201 characters", map[string]any{"queries": []any{lstText("nameQuery", "name", long+"x", "TEXT_QUERY_METHOD_CONTAINS")}}},
				{"domain of 201 characters", map[string]any{"queries": []any{lstText("domainQuery", "domain", long+"x", "TEXT_QUERY_METHOD_CONTAINS")}}},
				{"id of 201 characters", map[string]any{"queries": []any{map[string]any{"idQuery": map[string]any{"id": long + "x"}}}}},
				{"undefined method", map[string]any{"queries": []any{map[string]any{"nameQuery": map[string]any{"name": "a", "method": 99}}}}},
				{"undefined state", map[string]any{"queries": []any{map[string]any{"stateQuery": map[string]any{"state": 99}}}}},
				{"empty query", map[string]any{"queries": []any{map[string]any{}}}},
				{"undefined sorting column", map[string]any{"sortingColumn": 99}},
			} {
				usrRefused(t, e, tc.name, "POST", path, e.AdminToken, "", tc.body, 400, 3)
			}
		})
	})
}
