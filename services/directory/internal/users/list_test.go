package users_test

import (
	"context"
	"slices"
	"testing"

	"connectrpc.com/connect"

	"github.com/gatehouse-id/gatehouse/pkg/db"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/eventstore"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/orgs"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/projections"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/storetest"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/textquery"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/users"
)

// Search compares characters, not bytes, on both dialects.
func TestSearchTextMethods(t *testing.T) {
	storetest.Run(t, func(t *testing.T, d db.Dialect) {
		ctx := context.Background()
		st := storetest.Open(t, d)
		es := eventstore.New(st, nil)
		projections.RegisterAll(es)
		orgID, _, err := (&orgs.Commands{ES: es, IssuerHost: "example.com"}).AddOrg(ctx, "test", "Zürich AG", nil)
		if err != nil {
			t.Fatal(err)
		}
		org, err := (&orgs.Queries{DB: st}).Get(ctx, orgID)
		if err != nil {
			t.Fatal(err)
		}
		q := &users.Queries{DB: st}
		cmds := &users.Commands{ES: es, Q: q}
		for _, n := range []string{"zoë", "noël", "joe", "Chloë"} {
			if _, _, err := cmds.AddMachine(ctx, "test", org, users.MachineAdded{UserName: n, Name: n}); err != nil {
				t.Fatal(err)
			}
		}
		// User names are unique after case folding and NFKC.
		for _, n := range []string{"Zoë", "ZOË", "zoe\u0308", "ｚｏë"} {
			if _, _, err := cmds.AddMachine(ctx, "test", org, users.MachineAdded{UserName: n, Name: n}); connect.CodeOf(err) != connect.CodeAlreadyExists {
				t.Errorf("AddMachine(%q) beside zoë = %v; want AlreadyExists", n, err)
			}
		}
		for _, tc := range []struct {
			m     textquery.Method
			field users.QueryField
			v     string
			want  []string
		}{
			{textquery.EndsWith, users.QueryUserName, "oë", []string{"Chloë", "zoë"}},
			{textquery.EndsWith, users.QueryUserName, "ë", []string{"Chloë", "zoë"}},
			{textquery.StartsWith, users.QueryUserName, "zo", []string{"zoë"}},
			{textquery.StartsWith, users.QueryUserName, "ch", nil},
			{textquery.StartsWith, users.QueryUserName, "noë", []string{"noël"}},
			{textquery.StartsWithIgnoreCase, users.QueryUserName, "cHL", []string{"Chloë"}},
			{textquery.StartsWithIgnoreCase, users.QueryUserName, "ZO", []string{"zoë"}},
			{textquery.Contains, users.QueryUserName, "ë", []string{"Chloë", "noël", "zoë"}},
			{textquery.Equals, users.QueryUserName, "zoë", []string{"zoë"}},
			{textquery.Equals, users.QueryLoginName, "joe@zurich-ag.example.com", []string{"joe"}},
			{textquery.EndsWith, users.QueryLoginName, "ë@zurich-ag.example.com", []string{"Chloë", "zoë"}},
		} {
			list, total, err := q.Search(ctx, users.Search{OrgID: orgID, Queries: []users.Query{{Field: tc.field, Text: tc.v, Method: tc.m}},
				Page: users.Page{Limit: 10, Asc: true}})
			if err != nil {
				t.Fatalf("%d %q: %v", tc.m, tc.v, err)
			}
			var got []string
			for _, u := range list {
				got = append(got, u.UserName)
			}
			if !slices.Equal(got, tc.want) || total != uint64(len(tc.want)) {
				t.Errorf("method %d %q: %v (total %d); want %v", tc.m, tc.v, got, total, tc.want)
			}
		}
	})
}
