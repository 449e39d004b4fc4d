package management_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/gatehouse-id/gatehouse/pkg/db"
	managementv1 "github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/management/v1"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/eventstore"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/mgmttest"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/orgs"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/storetest"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/users"
)

// mdWriteDetails fails unless d are the details of ev, the (last) event of
// a write.
func mdWriteDetails(t *testing.T, what string, d *managementv1.ObjectDetails, ev eventstore.Event) {
	t.Helper()
	if d.GetSequence() != ev.Sequence || !d.GetCreationDate().AsTime().Equal(ev.CreatedAt) ||
		!d.GetChangeDate().AsTime().Equal(ev.CreatedAt) || d.GetResourceOwner() != ev.ResourceOwner {
		t.Fatalf("%s: details %v; want sequence %d, dates %v, owner %s", what, d, ev.Sequence, ev.CreatedAt, ev.ResourceOwner)
	}
}

// mdReadDetails fails unless d are the details of an entry first set by
// first and last changed by last.
func mdReadDetails(t *testing.T, what string, d *managementv1.ObjectDetails, first, last eventstore.Event) {
	t.Helper()
	if d.GetSequence() != last.Sequence || !d.GetCreationDate().AsTime().Equal(first.CreatedAt) ||
		!d.GetChangeDate().AsTime().Equal(last.CreatedAt) || d.GetResourceOwner() != first.ResourceOwner {
		t.Fatalf("%s: details %v; want sequence %d, created %v, changed %v, owner %s", what, d, last.Sequence, first.CreatedAt, last.CreatedAt, first.ResourceOwner)
	}
}

// mdJSONDetails fails unless the JSON details object d is that of a write
// whose last event is ev.
func mdJSONDetails(t *testing.T, what string, d any, ev eventstore.Event) {
	t.Helper()
	m, _ := d.(map[string]any)
	created, err1 := time.Parse(time.RFC3339Nano, fmt.Sprint(m["creationDate"]))
	changed, err2 := time.Parse(time.RFC3339Nano, fmt.Sprint(m["changeDate"]))
	if err1 != nil || err2 != nil || m["sequence"] != formatUint(ev.Sequence) || !created.Equal(ev.CreatedAt) ||
		!changed.Equal(ev.CreatedAt) || m["resourceOwner"] != ev.ResourceOwner {
		t.Fatalf("%s: details %v; want sequence %q, dates %v, owner %s", what, d, formatUint(ev.Sequence), ev.CreatedAt, ev.ResourceOwner)
	}
}

// mdLast returns the last event of an aggregate.
func mdLast(t *testing.T, e *mgmttest.Env, id string) eventstore.Event {
	t.Helper()
	evs := e.Events(id)
	if len(evs) == 0 {
		t.Fatalf("no events for %s", id)
	}
	return evs[len(evs)-1]
}

// mdKeys returns the keys set on a user, sorted, read from the projection.
func mdKeys(t *testing.T, e *mgmttest.Env, userID string) []string {
	t.Helper()
	var keys []string
	if err := e.DB.Select(context.Background(), &keys, `SELECT key FROM user_metadata WHERE user_id = ?`, userID); err != nil {
		t.Fatal(err)
	}
	slices.Sort(keys)
	return keys
}

func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

func TestMetadataOverEveryProtocol(t *testing.T) {
	storetest.Run(t, func(t *testing.T, d db.Dialect) {
		e := mgmttest.Start(t, d)
		ctx := context.Background()
		for _, proto := range mgmttest.Protocols {
			t.Run(proto, func(t *testing.T) {
				c := e.Client(proto, e.AdminToken, "")
				id := e.SeedUser(e.OrgID, "md-"+proto)

				set, err := c.SetUserMetadata(ctx, &managementv1.SetUserMetadataRequest{Id: id, Key: "color", Value: []byte("blue")})
				if err != nil {
					t.Fatalf("SetUserMetadata: %v", err)
				}
				first := mdLast(t, e, id)
				if first.Type != users.EventMetadataSet || set.GetId() != id {
					t.Fatalf("event %s, id %q; want %s for user %s", first.Type, set.GetId(), users.EventMetadataSet, id)
				}
				mdWriteDetails(t, "SetUserMetadata", set.GetDetails(), first)

				got, err := c.GetUserMetadata(ctx, &managementv1.GetUserMetadataRequest{Id: id, Key: "color"})
				if err != nil {
					t.Fatalf("GetUserMetadata: %v", err)
				}
				if md := got.GetMetadata(); md.GetKey() != "color" || string(md.GetValue()) != "blue" {
					t.Fatalf("metadata %v; want color=blue", md)
				}
				mdReadDetails(t, "GetUserMetadata", got.GetMetadata().GetDetails(), first, first)

				// Replacing moves the change date and sequence, not the creation date.
				if _, err := c.SetUserMetadata(ctx, &managementv1.SetUserMetadataRequest{Id: id, Key: "color", Value: []byte("green")}); err != nil {
					t.Fatalf("SetUserMetadata again: %v", err)
				}
				second := mdLast(t, e, id)
				got, _ = c.GetUserMetadata(ctx, &managementv1.GetUserMetadataRequest{Id: id, Key: "color"})
				if string(got.GetMetadata().GetValue()) != "green" {
					t.Fatalf("value %q; want green", got.GetMetadata().GetValue())
				}
				mdReadDetails(t, "GetUserMetadata after replace", got.GetMetadata().GetDetails(), first, second)

				before := len(e.Events(id))
				bulk, err := c.BulkSetUserMetadata(ctx, &managementv1.BulkSetUserMetadataRequest{Id: id, Metadata: []*managementv1.BulkSetUserMetadataRequest_Metadata{
					{Key: "app.a", Value: []byte("1")}, {Key: "app.b", Value: []byte("2")}, {Key: "size", Value: []byte("L")},
				}})
				if err != nil {
					t.Fatalf("BulkSetUserMetadata: %v", err)
				}
				evs := e.Events(id)
				if len(evs) != before+3 {
					t.Fatalf("bulk set added %d events; want 3 (one per entry, one push)", len(evs)-before)
				}
				mdWriteDetails(t, "BulkSetUserMetadata", bulk.GetDetails(), evs[len(evs)-1])

				list, err := c.ListUserMetadata(ctx, &managementv1.ListUserMetadataRequest{Id: id,
					Query:   &managementv1.ListQuery{Asc: true},
					Queries: []*managementv1.MetadataQuery{{Query: &managementv1.MetadataQuery_KeyQuery{KeyQuery: &managementv1.MetadataKeyQuery{Key: "APP.", Method: managementv1.TextQueryMethod_TEXT_QUERY_METHOD_STARTS_WITH_IGNORE_CASE}}}},
				})
				if err != nil {
					t.Fatalf("ListUserMetadata: %v", err)
				}
				var keys []string
				for _, r := range list.GetResult() {
					keys = append(keys, r.GetKey()+"="+string(r.GetValue()))
				}
				last := evs[len(evs)-1]
				ld := list.GetDetails()
				if !slices.Equal(keys, []string{"app.a=1", "app.b=2"}) || ld.GetTotalResult() != 2 ||
					ld.GetProcessedSequence() != last.Sequence || !ld.GetViewTimestamp().AsTime().Equal(last.CreatedAt) {
					t.Fatalf("list %v details %v; want [app.a=1 app.b=2], total 2, processed %d at %v", keys, ld, last.Sequence, last.CreatedAt)
				}
				mdReadDetails(t, "listed app.b", list.GetResult()[1].GetDetails(), evs[len(evs)-2], evs[len(evs)-2])

				rm, err := c.RemoveUserMetadata(ctx, &managementv1.RemoveUserMetadataRequest{Id: id, Key: "color"})
				if err != nil {
					t.Fatalf("RemoveUserMetadata: %v", err)
				}
				removed := mdLast(t, e, id)
				if removed.Type != users.EventMetadataRemoved {
					t.Fatalf("event %s; want %s", removed.Type, users.EventMetadataRemoved)
				}
				mdWriteDetails(t, "RemoveUserMetadata", rm.GetDetails(), removed)
				_, err = c.GetUserMetadata(ctx, &managementv1.GetUserMetadataRequest{Id: id, Key: "color"})
				if connect.CodeOf(err) != connect.CodeNotFound {
					t.Fatalf("Get removed key: %v; want NotFound", err)
				}

				brm, err := c.BulkRemoveUserMetadata(ctx, &managementv1.BulkRemoveUserMetadataRequest{Id: id, Keys: []string{"app.a", "size"}})
				if err != nil {
					t.Fatalf("BulkRemoveUserMetadata: %v", err)
				}
				mdWriteDetails(t, "BulkRemoveUserMetadata", brm.GetDetails(), mdLast(t, e, id))
				if got := mdKeys(t, e, id); !slices.Equal(got, []string{"app.b"}) {
					t.Fatalf("keys %v; want [app.b]", got)
				}

				// The user's own details follow its metadata events.
				u, err := c.GetUserByID(ctx, &managementv1.GetUserByIDRequest{Id: id})
				if err != nil {
					t.Fatal(err)
				}
				if u.GetUser().GetDetails().GetSequence() != mdLast(t, e, id).Sequence {
					t.Fatalf("user details %v; want sequence %d", u.GetUser().GetDetails(), mdLast(t, e, id).Sequence)
				}

				// Errors travel over the protocol with their codes.
				n := e.EventCount()
				_, err = c.RemoveUserMetadata(ctx, &managementv1.RemoveUserMetadataRequest{Id: id, Key: "color"})
				if connect.CodeOf(err) != connect.CodeNotFound {
					t.Fatalf("remove unknown key: %v; want NotFound", err)
				}
				_, err = c.SetUserMetadata(ctx, &managementv1.SetUserMetadataRequest{Id: id, Key: "k"})
				if connect.CodeOf(err) != connect.CodeInvalidArgument {
					t.Fatalf("set without value: %v; want InvalidArgument", err)
				}
				_, err = c.BulkRemoveUserMetadata(ctx, &managementv1.BulkRemoveUserMetadataRequest{Id: id, Keys: []string{"app.b", "nope"}})
				if connect.CodeOf(err) != connect.CodeNotFound {
					t.Fatalf("bulk remove with unknown key: %v; want NotFound", err)
				}
				if e.EventCount() != n || !slices.Equal(mdKeys(t, e, id), []string{"app.b"}) {
					t.Fatal("a refused request changed something")
				}
			})
		}
	})
}

func TestMetadataOverREST(t *testing.T) {
	storetest.Run(t, func(t *testing.T, d db.Dialect) {
		e := mgmttest.Start(t, d)
		id := e.SeedUser(e.OrgID, "rest")
		base := "/management/v1/users/" + id + "/metadata/"

		r := e.REST("POST", base+"lang", e.AdminToken, "", map[string]any{"value": b64("de")})
		if r.Status != 200 || r.JSON["id"] != id {
			t.Fatalf("set: %d %s", r.Status, r.Body)
		}
		mdJSONDetails(t, "set", r.JSON["details"], mdLast(t, e, id))

		// _bulk is the bulk operation, not a key named "_bulk".
		r = e.REST("POST", base+"_bulk", e.AdminToken, "", map[string]any{"metadata": []any{
			map[string]any{"key": "a", "value": b64("1")}, map[string]any{"key": "b", "value": b64("2")},
		}})
		if r.Status != 200 {
			t.Fatalf("bulk set: %d %s", r.Status, r.Body)
		}
		mdJSONDetails(t, "bulk set", r.JSON["details"], mdLast(t, e, id))
		if got := mdKeys(t, e, id); !slices.Equal(got, []string{"a", "b", "lang"}) {
			t.Fatalf("keys %v; want [a b lang]", got)
		}

		r = e.REST("GET", base+"lang", e.AdminToken, "", nil)
		md, _ := r.JSON["metadata"].(map[string]any)
		if r.Status != 200 || md["key"] != "lang" || md["value"] != b64("de") {
			t.Fatalf("get: %d %s", r.Status, r.Body)
		}
		mdJSONDetails(t, "get", md["details"], e.Events(id)[1])

		r = e.REST("POST", base+"_search", e.AdminToken, "", map[string]any{
			"query":   map[string]any{"limit": 1, "offset": "1"},
			"queries": []any{map[string]any{"keyQuery": map[string]any{"key": "lang", "method": "TEXT_QUERY_METHOD_CONTAINS"}}, map[string]any{"keyQuery": map[string]any{"key": "zzz"}}},
		})
		if ld, _ := r.JSON["details"].(map[string]any); r.Status != 200 || r.JSON["result"] != nil || (ld["totalResult"] != nil && ld["totalResult"] != "0") {
			t.Fatalf("search with contradicting queries: %d %s; want none", r.Status, r.Body)
		}
		r = e.REST("POST", base+"_search", e.AdminToken, "", map[string]any{"query": map[string]any{"limit": 1, "offset": "1"}})
		res, _ := r.JSON["result"].([]any)
		ld, _ := r.JSON["details"].(map[string]any)
		if r.Status != 200 || len(res) != 1 || res[0].(map[string]any)["key"] != "b" || ld["totalResult"] != "3" ||
			ld["processedSequence"] != formatUint(mdLast(t, e, id).Sequence) {
			t.Fatalf("search (descending, second of three): %d %s", r.Status, r.Body)
		}

		r = e.REST("DELETE", base+"lang", e.AdminToken, "", nil)
		if r.Status != 200 {
			t.Fatalf("delete: %d %s", r.Status, r.Body)
		}
		mdJSONDetails(t, "delete", r.JSON["details"], mdLast(t, e, id))

		// The seed's Bulk Delete Metadata: DELETE with a JSON body {keys}.
		r = e.REST("DELETE", base+"_bulk", e.AdminToken, "", map[string]any{"keys": []string{"a", "b"}})
		if r.Status != 200 {
			t.Fatalf("bulk delete: %d %s", r.Status, r.Body)
		}
		mdJSONDetails(t, "bulk delete", r.JSON["details"], mdLast(t, e, id))
		if got := mdKeys(t, e, id); len(got) != 0 {
			t.Fatalf("keys %v; want none", got)
		}
	})
}

func TestMetadataLimitsAndErrors(t *testing.T) {
	storetest.Run(t, func(t *testing.T, d db.Dialect) {
		e := mgmttest.Start(t, d)
		id := e.SeedUser(e.OrgID, "limits")
		base := "/management/v1/users/" + id + "/metadata/"
		otherOrg, _ := e.SeedOrg("Other Org", "other-owner")
		foreign := e.SeedUser(otherOrg, "foreign")
		if r := e.REST("POST", "/management/v1/users/"+foreign+"/metadata/secret", e.AdminToken, otherOrg, map[string]any{"value": b64("x")}); r.Status != 200 {
			t.Fatalf("IAM_OWNER sets metadata in another org with x-service-orgid: %d %s", r.Status, r.Body)
		}
		plain := e.SeedUser(e.OrgID, "plain")
		manager := e.SeedUser(e.OrgID, "manager")
		e.SeedMember(e.OrgID, manager, orgs.RoleOrgUserManager)

		entries := func(n int, prefix string) []any {
			out := make([]any, n)
			for i := range out {
				out[i] = map[string]any{"key": fmt.Sprintf("%s%03d", prefix, i), "value": b64("v")}
			}
			return out
		}
		keys := func(n int, prefix string) []string {
			out := make([]string, n)
			for i := range out {
				out[i] = fmt.Sprintf("%s%03d", prefix, i)
			}
			return out
		}
		queries := func(n int) []any {
			out := make([]any, n)
			for i := range out {
				out[i] = map[string]any{"keyQuery": map[string]any{"key": "k", "method": "TEXT_QUERY_METHOD_CONTAINS"}}
			}
			return out
		}
		key200, key201 := strings.Repeat("k", 200), strings.Repeat("k", 201)
		id200, id201 := strings.Repeat("9", 200), strings.Repeat("9", 201)
		value500000 := base64.StdEncoding.EncodeToString(make([]byte, 500000))
		value500001 := base64.StdEncoding.EncodeToString(make([]byte, 500001))
		users := "/management/v1/users/"

		cases := []struct {
			name         string
			method, path string
			token, org   string
			body         any
			status       int
			detail       string
		}{
			// Key: 1-200 characters.
			{"key of 200 characters", "POST", base + key200, "", "", map[string]any{"value": b64("v")}, 200, ""},
			{"key of 201 characters", "POST", base + key201, "", "", map[string]any{"value": b64("v")}, 400, "METADATA-invalid"},
			{"blank key", "POST", base + "%20", "", "", map[string]any{"value": b64("v")}, 400, "METADATA-invalid"},
			{"get key of 201 characters", "GET", base + key201, "", "", nil, 400, "METADATA-invalid"},
			{"delete key of 201 characters", "DELETE", base + key201, "", "", nil, 400, "METADATA-invalid"},
			// Value: 1-500000 bytes.
			{"value of 1 byte", "POST", base + "small", "", "", map[string]any{"value": b64("v")}, 200, ""},
			{"value of 500000 bytes", "POST", base + "big", "", "", map[string]any{"value": value500000}, 200, ""},
			{"value of 500001 bytes", "POST", base + "bigger", "", "", map[string]any{"value": value500001}, 400, "METADATA-invalid"},
			{"no value", "POST", base + "none", "", "", map[string]any{}, 400, "METADATA-invalid"},
			{"value not base64", "POST", base + "bad", "", "", map[string]any{"value": "*not base64*"}, 400, ""},
			{"malformed JSON", "POST", base + "bad", "", "", `{"value": `, 400, ""},
			// Bulk set: 1-100 entries, distinct keys, all or nothing.
			{"bulk set of 100", "POST", base + "_bulk", "", "", map[string]any{"metadata": entries(100, "bulk")}, 200, ""},
			{"bulk set of 101", "POST", base + "_bulk", "", "", map[string]any{"metadata": entries(101, "over")}, 400, "METADATA-invalid"},
			{"bulk set of none", "POST", base + "_bulk", "", "", map[string]any{"metadata": []any{}}, 400, "METADATA-invalid"},
			{"bulk set with a repeated key", "POST", base + "_bulk", "", "", map[string]any{"metadata": []any{
				map[string]any{"key": "dup", "value": b64("1")}, map[string]any{"key": "dup", "value": b64("2")}}}, 400, "METADATA-invalid"},
			{"bulk set with one bad entry", "POST", base + "_bulk", "", "", map[string]any{"metadata": []any{
				map[string]any{"key": "fine", "value": b64("1")}, map[string]any{"key": key201, "value": b64("2")}}}, 400, "METADATA-invalid"},
			{"bulk set with a too large value", "POST", base + "_bulk", "", "", map[string]any{"metadata": []any{
				map[string]any{"key": "fine", "value": b64("1")}, map[string]any{"key": "huge", "value": value500001}}}, 400, "METADATA-invalid"},
			// Bulk remove: 1-100 keys, each set, all or nothing.
			{"bulk remove of 101", "DELETE", base + "_bulk", "", "", map[string]any{"keys": keys(101, "bulk")}, 400, "METADATA-invalid"},
			{"bulk remove without keys", "DELETE", base + "_bulk", "", "", map[string]any{"keys": []string{}}, 400, "METADATA-invalid"},
			{"bulk remove with no body", "DELETE", base + "_bulk", "", "", nil, 400, "METADATA-invalid"},
			{"bulk remove with an empty key", "DELETE", base + "_bulk", "", "", map[string]any{"keys": []string{"bulk000", ""}}, 400, "METADATA-invalid"},
			{"bulk remove with an unknown key", "DELETE", base + "_bulk", "", "", map[string]any{"keys": []string{"bulk000", "nope", "bulk001"}}, 404, "METADATA-not-found"},
			{"bulk remove of 100", "DELETE", base + "_bulk", "", "", map[string]any{"keys": keys(100, "bulk")}, 200, ""},
			{"bulk remove of removed keys", "DELETE", base + "_bulk", "", "", map[string]any{"keys": []string{"bulk000"}}, 404, "METADATA-not-found"},
			// Unknown keys.
			{"get unknown key", "GET", base + "nope", "", "", nil, 404, "METADATA-not-found"},
			{"delete unknown key", "DELETE", base + "nope", "", "", nil, 404, "METADATA-not-found"},
			// List: limit at most 1000, at most 20 queries, each a key query with a known method.
			{"list limit 1000", "POST", base + "_search", "", "", map[string]any{"query": map[string]any{"limit": 1000}}, 200, ""},
			{"list limit 1001", "POST", base + "_search", "", "", map[string]any{"query": map[string]any{"limit": 1001}}, 400, "METADATA-invalid-query"},
			{"list with 20 queries", "POST", base + "_search", "", "", map[string]any{"queries": queries(20)}, 200, ""},
			{"list with 21 queries", "POST", base + "_search", "", "", map[string]any{"queries": queries(21)}, 400, "METADATA-invalid-query"},
			{"list with an empty query", "POST", base + "_search", "", "", map[string]any{"queries": []any{map[string]any{}}}, 400, "METADATA-invalid-query"},
			{"list with an unknown method", "POST", base + "_search", "", "", map[string]any{"queries": []any{map[string]any{"keyQuery": map[string]any{"key": "k", "method": 99}}}}, 400, "METADATA-invalid-query"},
			{"list query of 200 characters", "POST", base + "_search", "", "", map[string]any{"queries": []any{map[string]any{"keyQuery": map[string]any{"key": key200}}}}, 200, ""},
			{"list query of 201 characters", "POST", base + "_search", "", "", map[string]any{"queries": []any{map[string]any{"keyQuery": map[string]any{"key": key201}}}}, 400, "METADATA-invalid-query"},
			// Users: ids of 1-200 characters; unknown and other organizations' users are NotFound.
			{"user id of 201 characters", "POST", users + id201 + "/metadata/k", "", "", map[string]any{"value": b64("v")}, 400, "METADATA-invalid"},
			{"unknown user id of 200 characters", "POST", users + id200 + "/metadata/k", "", "", map[string]any{"value": b64("v")}, 404, "USER-not-found"},
			{"set on another org's user", "POST", users + foreign + "/metadata/k", "", "", map[string]any{"value": b64("v")}, 404, "USER-not-found"},
			{"bulk set on another org's user", "POST", users + foreign + "/metadata/_bulk", "", "", map[string]any{"metadata": entries(1, "k")}, 404, "USER-not-found"},
			{"get of another org's user", "GET", users + foreign + "/metadata/secret", "", "", nil, 404, "USER-not-found"},
			{"list of another org's user", "POST", users + foreign + "/metadata/_search", "", "", map[string]any{}, 404, "USER-not-found"},
			{"delete on another org's user", "DELETE", users + foreign + "/metadata/secret", "", "", nil, 404, "USER-not-found"},
			{"bulk delete on another org's user", "DELETE", users + foreign + "/metadata/_bulk", "", "", map[string]any{"keys": []string{"secret"}}, 404, "USER-not-found"},
			// Access.
			{"no token", "GET", base + "small", "-", "", nil, 401, ""},
			{"caller without a role", "POST", base + "k", e.Intro.Mint(plain), "", map[string]any{"value": b64("v")}, 403, ""},
			{"caller without a role reads", "GET", base + "small", e.Intro.Mint(plain), "", nil, 403, ""},
			{"user manager writes", "POST", base + "by-manager", e.Intro.Mint(manager), "", map[string]any{"value": b64("v")}, 200, ""},
			{"user manager in another org", "GET", users + foreign + "/metadata/secret", e.Intro.Mint(manager), otherOrg, nil, 403, ""},
			{"IAM_OWNER in another org", "GET", users + foreign + "/metadata/secret", "", otherOrg, nil, 200, ""},
		}
		for _, tc := range cases {
			token := tc.token
			switch token {
			case "":
				token = e.AdminToken
			case "-":
				token = ""
			}
			before := e.EventCount()
			r := e.REST(tc.method, tc.path, token, tc.org, tc.body)
			if r.Status != tc.status {
				t.Errorf("%s: status %d %.300s; want %d", tc.name, r.Status, r.Body, tc.status)
				continue
			}
			if tc.status != 200 && e.EventCount() != before {
				t.Errorf("%s: refused request added %d events", tc.name, e.EventCount()-before)
			}
			if tc.detail != "" {
				if got, typ := r.Detail(); got != tc.detail || typ != "type.googleapis.com/gatehouse.management.v1.ErrorDetail" {
					t.Errorf("%s: detail %q %q; want %q ErrorDetail", tc.name, got, typ, tc.detail)
				}
			}
		}
		// The all-or-nothing cases left exactly what succeeded.
		got := mdKeys(t, e, id)
		want := []string{"big", "by-manager", key200, "small"}
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Fatalf("keys %v; want %v", got, want)
		}
		r := e.REST("GET", base+"big", e.AdminToken, "", nil)
		if md, _ := r.JSON["metadata"].(map[string]any); r.Status != 200 || md["value"] != value500000 {
			t.Fatalf("500000-byte value did not come back intact: %d", r.Status)
		}
		// A key repeated in a bulk removal is removed once.
		e.REST("POST", base+"_bulk", e.AdminToken, "", map[string]any{"metadata": entries(2, "twice")})
		n := len(e.Events(id))
		if r := e.REST("DELETE", base+"_bulk", e.AdminToken, "", map[string]any{"keys": []string{"twice000", "twice001", "twice000"}}); r.Status != 200 {
			t.Fatalf("bulk remove with a repeated key: %d %s", r.Status, r.Body)
		}
		if added := len(e.Events(id)) - n; added != 2 {
			t.Fatalf("bulk remove with a repeated key added %d events; want 2", added)
		}
	})
}

func TestMetadataListPaging(t *testing.T) {
	storetest.Run(t, func(t *testing.T, d db.Dialect) {
		e := mgmttest.Start(t, d)
		id := e.SeedUser(e.OrgID, "pager")
		c := e.Client("grpc", e.AdminToken, "")
		ctx := context.Background()
		var entries []*managementv1.BulkSetUserMetadataRequest_Metadata
		for i := range 105 {
			entries = append(entries, &managementv1.BulkSetUserMetadataRequest_Metadata{Key: fmt.Sprintf("k%03d", i), Value: []byte{byte(i)}})
		}
		if _, err := c.BulkSetUserMetadata(ctx, &managementv1.BulkSetUserMetadataRequest{Id: id, Metadata: entries[:100]}); err != nil {
			t.Fatal(err)
		}
		if _, err := c.BulkSetUserMetadata(ctx, &managementv1.BulkSetUserMetadataRequest{Id: id, Metadata: entries[100:]}); err != nil {
			t.Fatal(err)
		}
		list := func(q *managementv1.ListQuery, queries ...*managementv1.MetadataQuery) ([]string, uint64) {
			t.Helper()
			res, err := c.ListUserMetadata(ctx, &managementv1.ListUserMetadataRequest{Id: id, Query: q, Queries: queries})
			if err != nil {
				t.Fatal(err)
			}
			var keys []string
			for _, r := range res.GetResult() {
				keys = append(keys, r.GetKey())
			}
			return keys, res.GetDetails().GetTotalResult()
		}
		if keys, total := list(nil); len(keys) != 100 || total != 105 || keys[0] != "k104" || keys[99] != "k005" {
			t.Fatalf("default page: %d keys (%v…), total %d; want the 100 highest keys descending of 105", len(keys), keys[:1], total)
		}
		if keys, total := list(&managementv1.ListQuery{Offset: 100, Limit: 10}); !slices.Equal(keys, []string{"k004", "k003", "k002", "k001", "k000"}) || total != 105 {
			t.Fatalf("last page: %v total %d", keys, total)
		}
		if keys, _ := list(&managementv1.ListQuery{Offset: 3, Limit: 2, Asc: true}); !slices.Equal(keys, []string{"k003", "k004"}) {
			t.Fatalf("ascending page: %v", keys)
		}
		if keys, total := list(&managementv1.ListQuery{Offset: 1000}); len(keys) != 0 || total != 105 {
			t.Fatalf("past the end: %v total %d", keys, total)
		}
		kq := func(key string, m managementv1.TextQueryMethod) *managementv1.MetadataQuery {
			return &managementv1.MetadataQuery{Query: &managementv1.MetadataQuery_KeyQuery{KeyQuery: &managementv1.MetadataKeyQuery{Key: key, Method: m}}}
		}
		for _, tc := range []struct {
			q    *managementv1.MetadataQuery
			want []string
		}{
			{kq("k042", managementv1.TextQueryMethod_TEXT_QUERY_METHOD_EQUALS), []string{"k042"}},
			{kq("K042", managementv1.TextQueryMethod_TEXT_QUERY_METHOD_EQUALS), nil},
			{kq("K042", managementv1.TextQueryMethod_TEXT_QUERY_METHOD_EQUALS_IGNORE_CASE), []string{"k042"}},
			{kq("k10", managementv1.TextQueryMethod_TEXT_QUERY_METHOD_STARTS_WITH), []string{"k100", "k101", "k102", "k103", "k104"}},
			{kq("K10", managementv1.TextQueryMethod_TEXT_QUERY_METHOD_STARTS_WITH_IGNORE_CASE), []string{"k100", "k101", "k102", "k103", "k104"}},
			{kq("03", managementv1.TextQueryMethod_TEXT_QUERY_METHOD_CONTAINS), []string{"k003", "k030", "k031", "k032", "k033", "k034", "k035", "k036", "k037", "k038", "k039", "k103"}},
			{kq("K09", managementv1.TextQueryMethod_TEXT_QUERY_METHOD_CONTAINS_IGNORE_CASE), []string{"k090", "k091", "k092", "k093", "k094", "k095", "k096", "k097", "k098", "k099"}},
			{kq("99", managementv1.TextQueryMethod_TEXT_QUERY_METHOD_ENDS_WITH), []string{"k099"}},
			{kq("K099", managementv1.TextQueryMethod_TEXT_QUERY_METHOD_ENDS_WITH_IGNORE_CASE), []string{"k099"}},
		} {
			keys, total := list(&managementv1.ListQuery{Asc: true}, tc.q)
			if !slices.Equal(keys, tc.want) || total != uint64(len(tc.want)) {
				t.Errorf("query %v: %v total %d; want %v", tc.q.GetKeyQuery(), keys, total, tc.want)
			}
		}
	})
}

func TestMetadataSurvivesRestart(t *testing.T) {
	storetest.Run(t, func(t *testing.T, d db.Dialect) {
		e := mgmttest.Start(t, d)
		id := e.SeedUser(e.OrgID, "durable")
		base := "/management/v1/users/" + id + "/metadata/"
		if r := e.REST("POST", base+"_bulk", e.AdminToken, "", map[string]any{"metadata": []any{
			map[string]any{"key": "a", "value": b64("1")}, map[string]any{"key": "c ü", "value": b64("2")}}}); r.Status != 200 {
			t.Fatalf("bulk set: %d %s", r.Status, r.Body)
		}
		if r := e.REST("DELETE", base+"a", e.AdminToken, "", nil); r.Status != 200 {
			t.Fatalf("delete: %d %s", r.Status, r.Body)
		}
		e.Restart()
		r := e.REST("GET", base+url.PathEscape("c ü"), e.AdminToken, "", nil)
		md, _ := r.JSON["metadata"].(map[string]any)
		if r.Status != 200 || md["key"] != "c ü" || md["value"] != b64("2") {
			t.Fatalf("get after restart: %d %s", r.Status, r.Body)
		}
		if r := e.REST("GET", base+"a", e.AdminToken, "", nil); r.Status != 404 {
			t.Fatalf("removed key after restart: %d; want 404", r.Status)
		}
		r = e.REST("POST", base+"_search", e.AdminToken, "", map[string]any{})
		if ld, _ := r.JSON["details"].(map[string]any); r.Status != 200 || ld["totalResult"] != "1" || ld["processedSequence"] != formatUint(mdLast(t, e, id).Sequence) {
			t.Fatalf("list after restart: %d %s", r.Status, r.Body)
		}
	})
}
