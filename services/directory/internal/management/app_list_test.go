package management_test

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"testing"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	"github.com/gatehouse-id/gatehouse/pkg/db"
	managementv1 "github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/management/v1"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/mgmttest"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/orgs"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/storetest"
)

func TestListApps(t *testing.T) {
	storetest.Run(t, func(t *testing.T, d db.Dialect) {
		e := mgmttest.Start(t, d)
		ctx := context.Background()
		project := appNewProject(t, e, e.AdminToken, "", "Listed")
		appsPath := "/management/v1/projects/" + project + "/apps"
		web := appOK(t, e, "AddOIDCApp web", "POST", appsPath+"/oidc", map[string]any{"name": "web",
			"redirectUris": []string{"https://rp.example/cb"}, "appType": "OIDC_APP_TYPE_WEB", "authMethodType": "OIDC_AUTH_METHOD_TYPE_BASIC"})
		native := appOK(t, e, "AddOIDCApp native", "POST", appsPath+"/oidc", map[string]any{"name": "native",
			"redirectUris": []string{"http://127.0.0.1/cb"}, "appType": "OIDC_APP_TYPE_NATIVE", "authMethodType": "OIDC_AUTH_METHOD_TYPE_NONE"})
		api := appOK(t, e, "AddAPIApp", "POST", appsPath+"/api", map[string]any{"name": "api", "authMethodType": "API_AUTH_METHOD_TYPE_BASIC"})
		secrets := []string{appStr(web.JSON["clientSecret"]), appStr(api.JSON["clientSecret"])}
		if secrets[0] == "" || secrets[1] == "" {
			t.Fatalf("no secrets generated: %s %s", web.Body, api.Body)
		}
		ids := map[string]string{"web": appStr(web.JSON["appId"]), "native": appStr(native.JSON["appId"]), "api": appStr(api.JSON["appId"])}
		all := []string{"api", "native", "web"}
		// Apps of another project of the organization are not listed.
		second := appNewProject(t, e, e.AdminToken, "", "Second")
		appOK(t, e, "AddAPIApp elsewhere", "POST", "/management/v1/projects/"+second+"/apps/api", map[string]any{"name": "elsewhere"})
		otherOrg, otherOwner := e.SeedOrg("Apps Elsewhere", "apps-owner")
		theirs := appNewProject(t, e, e.Intro.Mint(otherOwner), "", "Listed")
		path := appsPath + "/_search"

		t.Run("queries and no secrets", func(t *testing.T) {
			for _, tc := range []struct {
				name    string
				queries []any
				want    []string
			}{
				{"none", nil, all},
				{"equals", []any{lstText("nameQuery", "name", "web", "TEXT_QUERY_METHOD_EQUALS")}, []string{"web"}},
				{"equals is case-sensitive", []any{lstText("nameQuery", "name", "WEB", "TEXT_QUERY_METHOD_EQUALS")}, nil},
				{"contains ignoring case", []any{lstText("nameQuery", "name", "A", "TEXT_QUERY_METHOD_CONTAINS_IGNORE_CASE")}, []string{"api", "native"}},
				{"ends with", []any{lstText("nameQuery", "name", "ive", "TEXT_QUERY_METHOD_ENDS_WITH")}, []string{"native"}},
			} {
				r := e.REST("POST", path, e.AdminToken, "", map[string]any{"query": map[string]any{"asc": true}, "queries": tc.queries})
				for _, s := range secrets {
					if strings.Contains(string(r.Body), s) || strings.Contains(string(r.Body), "clientSecret") {
						t.Fatalf("%s: the response carries a client secret: %s", tc.name, r.Body)
					}
				}
				got, det := lstList(t, e, path, e.AdminToken, "", map[string]any{"query": map[string]any{"asc": true}, "queries": tc.queries}, "name")
				if !slices.Equal(got, tc.want) || det["totalResult"] != strconv.Itoa(len(tc.want)) {
					t.Errorf("%s: %v (total %v); want %v", tc.name, got, det["totalResult"], tc.want)
				}
			}
		})

		t.Run("as GetAppByID returns them, over every protocol", func(t *testing.T) {
			for _, protocol := range mgmttest.Protocols {
				c := e.Client(protocol, e.AdminToken, "")
				res, err := c.ListApps(ctx, &managementv1.ListAppsRequest{ProjectId: project, Query: &managementv1.ListQuery{Asc: true}})
				if err != nil {
					t.Fatalf("%s: %v", protocol, err)
				}
				if n := len(res.GetResult()); n != len(all) || res.GetDetails().GetTotalResult() != uint64(len(all)) {
					t.Fatalf("%s: %d apps; want %d", protocol, n, len(all))
				}
				for i, a := range res.GetResult() {
					want, err := c.GetAppByID(ctx, &managementv1.GetAppByIDRequest{ProjectId: project, AppId: ids[all[i]]})
					if err != nil {
						t.Fatal(err)
					}
					if !proto.Equal(a, want.GetApp()) {
						t.Fatalf("%s: listed %v; want what GetAppByID returns, %v", protocol, a, want.GetApp())
					}
				}
				evs := e.Events(project)
				last := evs[len(evs)-1]
				if det := res.GetDetails(); det.GetProcessedSequence() != last.Sequence || !det.GetViewTimestamp().AsTime().Equal(last.CreatedAt) {
					t.Fatalf("%s: details %v; want the project's last event %d at %v", protocol, det, last.Sequence, last.CreatedAt)
				}
			}
		})

		t.Run("order and paging", func(t *testing.T) {
			got, _ := lstList(t, e, path, e.AdminToken, "", map[string]any{}, "name")
			if want := []string{"web", "native", "api"}; !slices.Equal(got, want) {
				t.Fatalf("default order %v; want descending by name %v", got, want)
			}
			got, det := lstList(t, e, path, e.AdminToken, "", map[string]any{"query": map[string]any{"offset": "1", "limit": 1, "asc": true}}, "name")
			if !slices.Equal(got, []string{"native"}) || det["totalResult"] != "3" {
				t.Fatalf("offset 1 limit 1: %v (total %v); want [native] of 3", got, det["totalResult"])
			}
		})

		t.Run("unknown projects and other organizations", func(t *testing.T) {
			usrRefused(t, e, "unknown project", "POST", "/management/v1/projects/no-such-project/apps/_search", e.AdminToken, "", map[string]any{}, 404, 5)
			usrRefused(t, e, "another organization's project", "POST", "/management/v1/projects/"+theirs+"/apps/_search", e.AdminToken, "", map[string]any{}, 404, 5)
			_, err := e.Client("grpc", e.AdminToken, "").ListApps(ctx, &managementv1.ListAppsRequest{ProjectId: theirs})
			if connect.CodeOf(err) != connect.CodeNotFound {
				t.Fatalf("another organization's project over gRPC: %v; want NotFound", err)
			}
			if got, _ := lstList(t, e, "/management/v1/projects/"+theirs+"/apps/_search", e.AdminToken, otherOrg, map[string]any{}, "name"); len(got) != 0 {
				t.Fatalf("IAM owner with x-service-orgid: %v; want the (empty) list", got)
			}
			usrRefused(t, e, "its owner in our organization", "POST", path, e.Intro.Mint(otherOwner), e.OrgID, map[string]any{}, 403, 7)
			usrRefused(t, e, "its owner, our project in its organization", "POST", path, e.Intro.Mint(otherOwner), "", map[string]any{}, 404, 5)
			manager := e.SeedUser(e.OrgID, "al-manager")
			e.SeedMember(e.OrgID, manager, orgs.RoleOrgUserManager)
			usrRefused(t, e, "user manager", "POST", path, e.Intro.Mint(manager), "", map[string]any{}, 403, 7)
			_, err = e.Client("connect", e.AdminToken, "").ListApps(ctx, &managementv1.ListAppsRequest{ProjectId: strings.Repeat("1", 201)})
			if connect.CodeOf(err) != connect.CodeInvalidArgument {
				t.Fatalf("201-character project id: %v; want InvalidArgument", err)
			}
			_, err = e.Client("connect", e.AdminToken, "").ListApps(ctx, &managementv1.ListAppsRequest{ProjectId: strings.Repeat("1", 200)})
			if connect.CodeOf(err) != connect.CodeNotFound {
				t.Fatalf("unknown 200-character project id: %v; want NotFound", err)
			}
		})

		t.Run("limits", func(t *testing.T) {
			q20 := make([]any, 20)
			for i := range q20 {
				q20[i] = lstText("nameQuery", "name", "", "TEXT_QUERY_METHOD_STARTS_WITH")
			}
			if got, _ := lstList(t, e, path, e.AdminToken, "", map[string]any{"queries": q20}, "name"); len(got) != len(all) {
				t.Fatalf("20 queries: %v", got)
			}
			long := strings.Repeat("x", 200)
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
