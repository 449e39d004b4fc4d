package users_test

import (
	"context"
	"database/sql"
	"slices"
	"testing"
	"time"

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

// Names stored before normalisation get the Go form once; of two that
// become one, the older user keeps it.
func TestRepairNormalizedNames(t *testing.T) {
	storetest.Run(t, func(t *testing.T, d db.Dialect) {
		ctx := context.Background()
		st := storetest.Open(t, d)
		es := eventstore.New(st, nil)
		projections.RegisterAll(es)
		orgID, _, err := (&orgs.Commands{ES: es, IssuerHost: "example.com"}).AddOrg(ctx, "test", "Repair AG", nil)
		if err != nil {
			t.Fatal(err)
		}
		org, err := (&orgs.Queries{DB: st}).Get(ctx, orgID)
		if err != nil {
			t.Fatal(err)
		}
		cmds := &users.Commands{ES: es, Q: &users.Queries{DB: st}}
		ids := map[string]string{}
		for _, n := range []string{"Straße", "placeholder", "ÉMILE"} {
			id, _, err := cmds.AddMachine(ctx, "test", org, users.MachineAdded{UserName: n, Name: n})
			if err != nil {
				t.Fatal(err)
			}
			ids[n] = id
			time.Sleep(2 * time.Millisecond) // creation order
		}
		// What migration 00005's SQL LOWER left on an ASCII-only LOWER: a
		// newer "STRASSE" beside the older "Straße", and an unfolded É.
		for _, u := range []struct{ id, name, norm string }{
			{ids["Straße"], "Straße", "straße"}, {ids["placeholder"], "STRASSE", "strasse"}, {ids["ÉMILE"], "ÉMILE", "Émile"},
		} {
			if _, err := st.Exec(ctx, `UPDATE users SET user_name = ?, user_name_norm = ? WHERE id = ?`, u.name, u.norm, u.id); err != nil {
				t.Fatal(err)
			}
		}
		if err := users.RepairNormalizedNames(ctx, st, time.Now()); err != nil {
			t.Fatal(err)
		}
		norm := func(id string) *string {
			var v sql.NullString
			if err := st.Get(ctx, &v, `SELECT user_name_norm FROM users WHERE id = ?`, id); err != nil {
				t.Fatal(err)
			}
			if !v.Valid {
				return nil
			}
			return &v.String
		}
		if n := norm(ids["Straße"]); n == nil || *n != "strasse" {
			t.Errorf("older Straße: %v; want strasse", n)
		}
		if n := norm(ids["placeholder"]); n != nil {
			t.Errorf("newer STRASSE: %q; want NULL (the name is the older user's)", *n)
		}
		if n := norm(ids["ÉMILE"]); n == nil || *n != "émile" {
			t.Errorf("ÉMILE: %v; want émile", n)
		}
		// Once per store.
		if _, err := st.Exec(ctx, `UPDATE users SET user_name_norm = 'x' WHERE id = ?`, ids["ÉMILE"]); err != nil {
			t.Fatal(err)
		}
		if err := users.RepairNormalizedNames(ctx, st, time.Now()); err != nil {
			t.Fatal(err)
		}
		if n := norm(ids["ÉMILE"]); n == nil || *n != "x" {
			t.Errorf("a second repair ran: %v", n)
		}
	})
}
