package management_test

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/gatehouse-id/gatehouse/pkg/db"
	managementv1 "github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/management/v1"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/mgmttest"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/storetest"
)

// usrLastUserEvent is the sequence and time of the last event of any user.
func usrLastUserEvent(t *testing.T, e *mgmttest.Env) (uint64, time.Time) {
	t.Helper()
	var seq uint64
	if err := e.DB.Get(context.Background(), &seq, `SELECT MAX(sequence) FROM events WHERE aggregate_type = 'user'`); err != nil {
		t.Fatal(err)
	}
	var at time.Time
	if err := e.DB.Get(context.Background(), &at, `SELECT created_at FROM events WHERE sequence = ?`, seq); err != nil {
		t.Fatal(err)
	}
	return seq, at
}

func TestListUsers(t *testing.T) {
	storetest.Run(t, func(t *testing.T, d db.Dialect) {
		e := mgmttest.Start(t, d)
		ctx := context.Background()
		otherOrg, _ := e.SeedOrg("Other Org", "owner2")
		for _, n := range []string{"Alice.Smith", "alice.jones", "bob", "bob_2", "100%", "100x"} {
			e.SeedUser(e.OrgID, n)
		}
		inactive := e.SeedUser(e.OrgID, "zed")
		if r := e.REST("POST", "/management/v1/users/"+inactive+"/_deactivate", e.AdminToken, "", map[string]any{}); r.Status != 200 {
			t.Fatalf("deactivate: %d", r.Status)
		}
		if r := e.REST("POST", "/management/v1/users/machine", e.AdminToken, "", map[string]any{"userName": "svc-build", "name": "Build"}); r.Status != 200 {
			t.Fatalf("add machine: %d %s", r.Status, r.Body)
		}
		all := []string{"100%", "100x", "Alice.Smith", "admin", "alice.jones", "bob", "bob_2", "svc-build", "zed"} // bytewise order

		list := func(t *testing.T, org string, body map[string]any) ([]string, map[string]any) {
			t.Helper()
			r := e.REST("POST", "/management/v1/users/_search", e.AdminToken, org, body)
			if r.Status != 200 {
				t.Fatalf("ListUsers %v: %d %s", body, r.Status, r.Body)
			}
			var names []string
			res, _ := r.JSON["result"].([]any)
			for _, u := range res {
				names = append(names, usrStr(u.(map[string]any)["userName"]))
			}
			det, _ := r.JSON["details"].(map[string]any)
			if det == nil {
				t.Fatalf("ListUsers %v: no details in %s", body, r.Body)
			}
			if det["totalResult"] == nil {
				det["totalResult"] = "0" // proto3 JSON omits zero values
			}
			return names, det
		}
		text := func(kind, field, value, method string) map[string]any {
			return map[string]any{kind: map[string]any{field: value, "method": method}}
		}
		asc := map[string]any{"asc": true}

		t.Run("queries", func(t *testing.T) {
			cases := []struct {
				name    string
				queries []any
				want    []string
			}{
				{"none", nil, all},
				{"user name equals", []any{text("userNameQuery", "userName", "bob", "TEXT_QUERY_METHOD_EQUALS")}, []string{"bob"}},
				{"equals is case-sensitive", []any{text("userNameQuery", "userName", "Bob", "TEXT_QUERY_METHOD_EQUALS")}, nil},
				{"equals ignoring case", []any{text("userNameQuery", "userName", "BOB", "TEXT_QUERY_METHOD_EQUALS_IGNORE_CASE")}, []string{"bob"}},
				{"default method is equals", []any{map[string]any{"userNameQuery": map[string]any{"userName": "bob"}}}, []string{"bob"}},
				{"starts with", []any{text("userNameQuery", "userName", "alice", "TEXT_QUERY_METHOD_STARTS_WITH")}, []string{"alice.jones"}},
				{"starts with ignoring case", []any{text("userNameQuery", "userName", "ALICE", "TEXT_QUERY_METHOD_STARTS_WITH_IGNORE_CASE")}, []string{"Alice.Smith", "alice.jones"}},
				{"contains, % is literal", []any{text("userNameQuery", "userName", "0%", "TEXT_QUERY_METHOD_CONTAINS")}, []string{"100%"}},
				{"contains, _ is literal", []any{text("userNameQuery", "userName", "_", "TEXT_QUERY_METHOD_CONTAINS")}, []string{"bob_2"}},
				{"contains is case-sensitive", []any{text("userNameQuery", "userName", "smith", "TEXT_QUERY_METHOD_CONTAINS")}, nil},
				{"contains ignoring case", []any{text("userNameQuery", "userName", "SMITH", "TEXT_QUERY_METHOD_CONTAINS_IGNORE_CASE")}, []string{"Alice.Smith"}},
				{"ends with", []any{text("userNameQuery", "userName", "_2", "TEXT_QUERY_METHOD_ENDS_WITH")}, []string{"bob_2"}},
				{"ends with ignoring case", []any{text("userNameQuery", "userName", ".SMITH", "TEXT_QUERY_METHOD_ENDS_WITH_IGNORE_CASE")}, []string{"Alice.Smith"}},
				{"ends with longer than any name", []any{text("userNameQuery", "userName", "x-Alice.Smith", "TEXT_QUERY_METHOD_ENDS_WITH")}, nil},
				{"email", []any{text("emailQuery", "emailAddress", "bob@example.com", "TEXT_QUERY_METHOD_EQUALS")}, []string{"bob"}},
				{"email matches humans only", []any{text("emailQuery", "emailAddress", "", "TEXT_QUERY_METHOD_EQUALS")}, nil},
				{"login name", []any{text("loginNameQuery", "loginName", "bob@acme-corp.localhost", "TEXT_QUERY_METHOD_EQUALS")}, []string{"bob"}},
				{"login name ends with the domain", []any{text("loginNameQuery", "loginName", "@ACME-CORP.localhost", "TEXT_QUERY_METHOD_ENDS_WITH_IGNORE_CASE")}, all},
				{"state", []any{map[string]any{"stateQuery": map[string]any{"state": "USER_STATE_INACTIVE"}}}, []string{"zed"}},
				{"type", []any{map[string]any{"typeQuery": map[string]any{"type": "TYPE_MACHINE"}}}, []string{"svc-build"}},
				{"all queries must match", []any{
					text("userNameQuery", "userName", "bob", "TEXT_QUERY_METHOD_STARTS_WITH"),
					text("emailQuery", "emailAddress", "_2@", "TEXT_QUERY_METHOD_CONTAINS"),
				}, []string{"bob_2"}},
				{"contradicting queries", []any{
					map[string]any{"typeQuery": map[string]any{"type": "TYPE_MACHINE"}},
					map[string]any{"stateQuery": map[string]any{"state": "USER_STATE_INACTIVE"}},
				}, nil},
			}
			for _, tc := range cases {
				names, det := list(t, "", map[string]any{"query": asc, "queries": tc.queries})
				if !slices.Equal(names, tc.want) {
					t.Errorf("%s: %v; want %v", tc.name, names, tc.want)
				}
				if det["totalResult"] != strconv.Itoa(len(tc.want)) {
					t.Errorf("%s: totalResult %v; want %d", tc.name, det["totalResult"], len(tc.want))
				}
			}
		})

		t.Run("order, paging and details", func(t *testing.T) {
			names, _ := list(t, "", map[string]any{})
			desc := slices.Clone(all)
			slices.Reverse(desc)
			if !slices.Equal(names, desc) {
				t.Fatalf("default order %v; want descending by user name %v", names, desc)
			}
			names, det := list(t, "", map[string]any{"query": map[string]any{"offset": "2", "limit": 3, "asc": true}})
			if !slices.Equal(names, all[2:5]) || det["totalResult"] != strconv.Itoa(len(all)) {
				t.Fatalf("offset 2 limit 3: %v (total %v); want %v (total %d)", names, det["totalResult"], all[2:5], len(all))
			}
			seq, at := usrLastUserEvent(t, e)
			vt, err := time.Parse(time.RFC3339Nano, usrStr(det["viewTimestamp"]))
			if det["processedSequence"] != strconv.FormatUint(seq, 10) || err != nil || !vt.Equal(at) {
				t.Fatalf("details %v; want processedSequence %d, viewTimestamp %v", det, seq, at)
			}
			// By last name ("Test <user name>" profiles; the machine's is empty).
			names, _ = list(t, "", map[string]any{"query": asc, "sortingColumn": "USER_FIELD_NAME_LAST_NAME"})
			if !slices.Equal(names, append([]string{"svc-build"}, slices.DeleteFunc(slices.Clone(all), func(s string) bool { return s == "svc-build" })...)) {
				t.Fatalf("by last name: %v", names)
			}
			// By creation date: the order the users were added.
			names, _ = list(t, "", map[string]any{"query": asc, "sortingColumn": "USER_FIELD_NAME_CREATION_DATE"})
			if want := []string{"admin", "Alice.Smith", "alice.jones", "bob", "bob_2", "100%", "100x", "zed", "svc-build"}; !slices.Equal(names, want) {
				t.Fatalf("by creation date: %v; want %v", names, want)
			}
			r := e.REST("POST", "/management/v1/users/_search", e.AdminToken, "", map[string]any{"sortingColumn": "USER_FIELD_NAME_STATE"})
			if r.JSON["sortingColumn"] != "USER_FIELD_NAME_STATE" {
				t.Fatalf("sortingColumn echoed as %v", r.JSON["sortingColumn"])
			}
			// Another organization's users are listed only for it.
			names, _ = list(t, otherOrg, map[string]any{})
			if !slices.Equal(names, []string{"owner2"}) {
				t.Fatalf("other org: %v; want [owner2]", names)
			}
		})

		t.Run("every protocol", func(t *testing.T) {
			for _, proto := range mgmttest.Protocols {
				res, err := e.Client(proto, e.AdminToken, "").ListUsers(ctx, &managementv1.ListUsersRequest{
					Query: &managementv1.ListQuery{Limit: 1, Asc: true},
					Queries: []*managementv1.UserQuery{{Query: &managementv1.UserQuery_UserNameQuery{UserNameQuery: &managementv1.UserNameQuery{
						UserName: "b", Method: managementv1.TextQueryMethod_TEXT_QUERY_METHOD_STARTS_WITH,
					}}}},
				})
				if err != nil {
					t.Fatalf("%s: %v", proto, err)
				}
				m := res
				if len(m.GetResult()) != 1 || m.GetResult()[0].GetUserName() != "bob" || m.GetDetails().GetTotalResult() != 2 {
					t.Fatalf("%s: %v", proto, m)
				}
				u := m.GetResult()[0]
				evs := e.Events(u.GetId())
				usrWantRead(t, proto+" user details", u.GetDetails(), evs[0], evs[len(evs)-1])
				if u.GetPreferredLoginName() != "bob@acme-corp.localhost" || u.GetHuman().GetEmail().GetEmail() != "bob@example.com" {
					t.Fatalf("%s: user %v", proto, u)
				}
				seq, at := usrLastUserEvent(t, e)
				if m.GetDetails().GetProcessedSequence() != seq || !m.GetDetails().GetViewTimestamp().AsTime().Equal(at) {
					t.Fatalf("%s: details %v; want %d at %v", proto, m.GetDetails(), seq, at)
				}
			}
			_, err := e.Client("grpc-web", e.AdminToken, "").ListUsers(ctx, &managementv1.ListUsersRequest{Query: &managementv1.ListQuery{Limit: 1001}})
			if connect.CodeOf(err) != connect.CodeInvalidArgument {
				t.Fatalf("limit 1001 over gRPC-web: %v; want InvalidArgument", err)
			}
		})

		t.Run("limits", func(t *testing.T) {
			for i := range 100 {
				e.SeedUser(e.OrgID, fmt.Sprintf("bulk-%03d", i))
			}
			total := len(all) + 100
			for _, tc := range []struct {
				limit any
				want  int
			}{{0, 100}, {nil, 100}, {1000, total}, {1, 1}} {
				q := map[string]any{}
				if tc.limit != nil {
					q["limit"] = tc.limit
				}
				names, det := list(t, "", map[string]any{"query": q})
				if len(names) != tc.want || det["totalResult"] != strconv.Itoa(total) {
					t.Errorf("limit %v: %d results (total %v); want %d (total %d)", tc.limit, len(names), det["totalResult"], tc.want, total)
				}
			}
			q20 := make([]any, 20)
			for i := range q20 {
				q20[i] = text("userNameQuery", "userName", "bulk-", "TEXT_QUERY_METHOD_STARTS_WITH")
			}
			if names, _ := list(t, "", map[string]any{"queries": q20}); len(names) != 100 {
				t.Fatalf("20 queries: %d results; want 100", len(names))
			}
			long := strings.Repeat("x", 200)
			for _, kind := range [][2]string{{"userNameQuery", "userName"}, {"emailQuery", "emailAddress"}, {"loginNameQuery", "loginName"}} {
				if names, _ := list(t, "", map[string]any{"queries": []any{text(kind[0], kind[1], long, "TEXT_QUERY_METHOD_CONTAINS")}}); len(names) != 0 {
					t.Fatalf("%s of 200 characters: %v", kind[0], names)
				}
				usrRefused(t, e, kind[0]+" of 201 characters", "POST", "/management/v1/users/_search", e.AdminToken, "",
					map[string]any{"queries": []any{text(kind[0], kind[1], long+"x", "TEXT_QUERY_METHOD_CONTAINS")}}, 400, 3)
			}
			bad := []struct {
				name string
				body any
			}{
				{"limit 1001", map[string]any{"query": map[string]any{"limit": 1001}}},
				{"21 queries", map[string]any{"queries": append(q20, q20[0])}},
				{"undefined method", map[string]any{"queries": []any{map[string]any{"userNameQuery": map[string]any{"userName": "a", "method": 99}}}}},
				{"undefined state", map[string]any{"queries": []any{map[string]any{"stateQuery": map[string]any{"state": 99}}}}},
				{"unspecified type", map[string]any{"queries": []any{map[string]any{"typeQuery": map[string]any{}}}}},
				{"empty query", map[string]any{"queries": []any{map[string]any{}}}},
				{"undefined sorting column", map[string]any{"sortingColumn": 99}},
			}
			for _, tc := range bad {
				usrRefused(t, e, tc.name, "POST", "/management/v1/users/_search", e.AdminToken, "", tc.body, 400, 3)
			}
			if r := e.REST("POST", "/management/v1/users/_search", e.AdminToken, "", `{"queries": [`); r.Status != 400 || r.Code() != 3 {
				t.Fatalf("malformed JSON: %d %s; want 400", r.Status, r.Body)
			}
			usrRefused(t, e, "no role", "POST", "/management/v1/users/_search", e.Intro.Mint(e.SeedUser(e.OrgID, "plain")), "", map[string]any{}, 403, 7)
			usrRefused(t, e, "other org without role", "POST", "/management/v1/users/_search", e.Intro.Mint(e.SeedUser(otherOrg, "plain2")), e.OrgID, map[string]any{}, 403, 7)
		})

		t.Run("processed sequence counts removals", func(t *testing.T) {
			if r := e.REST("DELETE", "/management/v1/users/"+inactive, e.AdminToken, "", nil); r.Status != 200 {
				t.Fatalf("remove: %d", r.Status)
			}
			removal := usrLast(t, e, inactive)
			e.Restart()
			_, det := list(t, "", map[string]any{"queries": []any{map[string]any{"stateQuery": map[string]any{"state": "USER_STATE_INACTIVE"}}}})
			if det["processedSequence"] != strconv.FormatUint(removal.Sequence, 10) || det["totalResult"] != "0" {
				t.Fatalf("after removal and restart: %v; want processedSequence %d and no inactive user", det, removal.Sequence)
			}
		})
	})
}
