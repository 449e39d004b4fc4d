package management_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"connectrpc.com/connect"

	"github.com/gatehouse-id/gatehouse/pkg/db"
	mv1 "github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/management/v1"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/mgmttest"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/storetest"
)

// The list, metadata, project and application limits are protovalidate
// rules in the management protos (issue 25, item 11). One past each limit
// a request gets the InvalidArgument it got from the hand checks before:
// the same error id and the same field message, once; at the limit that
// message is absent. (This test passes on the code before the move too.)
func TestProtoLimitsKeepTheirErrors(t *testing.T) {
	storetest.Run(t, func(t *testing.T, d db.Dialect) {
		e := mgmttest.Start(t, d)
		ctx := context.Background()
		c := e.Client("connect", e.AdminToken, "")
		user := e.SeedUser(e.OrgID, "pl-user")
		long := strings.Repeat
		lq := func(n uint32) *mv1.ListQuery { return &mv1.ListQuery{Limit: n} }
		userQs := func(n int, text string) (qs []*mv1.UserQuery) {
			for range n {
				qs = append(qs, &mv1.UserQuery{Query: &mv1.UserQuery_UserNameQuery{UserNameQuery: &mv1.UserNameQuery{UserName: text}}})
			}
			return qs
		}
		orgQs := func(n int, text string) (qs []*mv1.OrgQuery) {
			for range n {
				qs = append(qs, &mv1.OrgQuery{Query: &mv1.OrgQuery_NameQuery{NameQuery: &mv1.OrgNameQuery{Name: text}}})
			}
			return qs
		}
		idpQs := func(n int, text string) (qs []*mv1.IDPQuery) {
			for range n {
				qs = append(qs, &mv1.IDPQuery{Query: &mv1.IDPQuery_IdpNameQuery{IdpNameQuery: &mv1.IDPNameQuery{Name: text}}})
			}
			return qs
		}
		mdQs := func(n int, text string) (qs []*mv1.MetadataQuery) {
			for range n {
				qs = append(qs, &mv1.MetadataQuery{Query: &mv1.MetadataQuery_KeyQuery{KeyQuery: &mv1.MetadataKeyQuery{Key: text}}})
			}
			return qs
		}
		projQs := func(n int, text string) (qs []*mv1.ProjectQuery) {
			for range n {
				qs = append(qs, &mv1.ProjectQuery{Query: &mv1.ProjectQuery_NameQuery{NameQuery: &mv1.ProjectNameQuery{Name: text}}})
			}
			return qs
		}
		appQs := func(n int, text string) (qs []*mv1.AppQuery) {
			for range n {
				qs = append(qs, &mv1.AppQuery{Query: &mv1.AppQuery_NameQuery{NameQuery: &mv1.AppNameQuery{Name: text}}})
			}
			return qs
		}
		memberQs := func(n int, text string) (qs []*mv1.MemberQuery) {
			for range n {
				qs = append(qs, &mv1.MemberQuery{Query: &mv1.MemberQuery_FirstNameQuery{FirstNameQuery: &mv1.MemberFirstNameQuery{FirstName: text}}})
			}
			return qs
		}
		entries := func(n int, key string, value []byte) (es []*mv1.BulkSetUserMetadataRequest_Metadata) {
			for i := range n {
				es = append(es, &mv1.BulkSetUserMetadataRequest_Metadata{Key: fmt.Sprintf("%s%d", key, i), Value: value})
			}
			return es
		}
		keys := func(n int, key string) (ks []string) {
			for range n {
				ks = append(ks, key)
			}
			return ks
		}
		uris := func(n, length int) (us []string) {
			for i := range n {
				u := fmt.Sprintf("https://a.example/%03d/", i)
				us = append(us, u+long("x", length-len(u)))
			}
			return us
		}
		oidcApp := func(name string, redirect, postLogout []string) func() error {
			return func() error {
				_, err := c.AddOIDCApp(ctx, &mv1.AddOIDCAppRequest{ProjectId: "no-such-project", Name: name, RedirectUris: redirect, PostLogoutRedirectUris: postLogout})
				return err
			}
		}
		oidcUpdate := func(redirect, postLogout []string) func() error {
			return func() error {
				_, err := c.UpdateOIDCAppConfig(ctx, &mv1.UpdateOIDCAppConfigRequest{ProjectId: "no-such-project", AppId: "no-such-app", RedirectUris: redirect, PostLogoutRedirectUris: postLogout})
				return err
			}
		}

		type call func() error
		for _, tc := range []struct {
			name     string
			past, at call
			id, msg  string
		}{
			// ListQuery.limit: uint32.lte 1000, for every list request.
			{"ListUsers query.limit",
				func() error { _, err := c.ListUsers(ctx, &mv1.ListUsersRequest{Query: lq(1001)}); return err },
				func() error { _, err := c.ListUsers(ctx, &mv1.ListUsersRequest{Query: lq(1000)}); return err },
				"USER-invalid-query", "query.limit must be at most 1000"},
			{"ListOrgs query.limit",
				func() error { _, err := c.ListOrgs(ctx, &mv1.ListOrgsRequest{Query: lq(1001)}); return err },
				func() error { _, err := c.ListOrgs(ctx, &mv1.ListOrgsRequest{Query: lq(1000)}); return err },
				"ORG-invalid-query", "query.limit must be at most 1000"},
			{"ListOrgMembers query.limit",
				func() error { _, err := c.ListOrgMembers(ctx, &mv1.ListOrgMembersRequest{Query: lq(1001)}); return err },
				func() error { _, err := c.ListOrgMembers(ctx, &mv1.ListOrgMembersRequest{Query: lq(1000)}); return err },
				"MEMBER-invalid-query", "query.limit must be at most 1000"},
			{"ListOrgIDPs query.limit",
				func() error { _, err := c.ListOrgIDPs(ctx, &mv1.ListOrgIDPsRequest{Query: lq(1001)}); return err },
				func() error { _, err := c.ListOrgIDPs(ctx, &mv1.ListOrgIDPsRequest{Query: lq(1000)}); return err },
				"IDP-invalid-query", "query.limit must be at most 1000"},
			{"ListProjects query.limit",
				func() error { _, err := c.ListProjects(ctx, &mv1.ListProjectsRequest{Query: lq(1001)}); return err },
				func() error { _, err := c.ListProjects(ctx, &mv1.ListProjectsRequest{Query: lq(1000)}); return err },
				"PROJECT-invalid-query", "query.limit must be at most 1000"},
			{"ListApps query.limit",
				func() error {
					_, err := c.ListApps(ctx, &mv1.ListAppsRequest{ProjectId: "p", Query: lq(1001)})
					return err
				},
				func() error {
					_, err := c.ListApps(ctx, &mv1.ListAppsRequest{ProjectId: "p", Query: lq(1000)})
					return err
				},
				"APP-invalid-query", "query.limit must be at most 1000"},
			{"ListUserMetadata query.limit",
				func() error {
					_, err := c.ListUserMetadata(ctx, &mv1.ListUserMetadataRequest{Id: user, Query: lq(1001)})
					return err
				},
				func() error {
					_, err := c.ListUserMetadata(ctx, &mv1.ListUserMetadataRequest{Id: user, Query: lq(1000)})
					return err
				},
				"METADATA-invalid-query", "query.limit must be at most 1000"},
			{"ListMachineKeys query.limit",
				func() error {
					_, err := c.ListMachineKeys(ctx, &mv1.ListMachineKeysRequest{UserId: user, Query: lq(1001)})
					return err
				},
				func() error {
					_, err := c.ListMachineKeys(ctx, &mv1.ListMachineKeysRequest{UserId: user, Query: lq(1000)})
					return err
				},
				"USER-invalid-query", "query.limit must be at most 1000"},
			{"ListUserIDPs query.limit",
				func() error {
					_, err := c.ListUserIDPs(ctx, &mv1.ListUserIDPsRequest{UserId: user, Query: lq(1001)})
					return err
				},
				func() error {
					_, err := c.ListUserIDPs(ctx, &mv1.ListUserIDPsRequest{UserId: user, Query: lq(1000)})
					return err
				},
				"USER-invalid-query", "query.limit must be at most 1000"},
			{"ListProjectGrants query.limit",
				func() error {
					_, err := c.ListProjectGrants(ctx, &mv1.ListProjectGrantsRequest{ProjectId: "p", Query: lq(1001)})
					return err
				},
				func() error {
					_, err := c.ListProjectGrants(ctx, &mv1.ListProjectGrantsRequest{ProjectId: "p", Query: lq(1000)})
					return err
				},
				"PROJECT-GRANT-invalid-query", "query.limit must be at most 1000"},
			{"ListGrantedProjects query.limit",
				func() error {
					_, err := c.ListGrantedProjects(ctx, &mv1.ListGrantedProjectsRequest{Query: lq(1001)})
					return err
				},
				func() error {
					_, err := c.ListGrantedProjects(ctx, &mv1.ListGrantedProjectsRequest{Query: lq(1000)})
					return err
				},
				"PROJECT-GRANT-invalid-query", "query.limit must be at most 1000"},

			// queries: repeated.max_items 20; query texts: string.max_len 200.
			{"ListUsers queries",
				func() error { _, err := c.ListUsers(ctx, &mv1.ListUsersRequest{Queries: userQs(21, "a")}); return err },
				func() error { _, err := c.ListUsers(ctx, &mv1.ListUsersRequest{Queries: userQs(20, "a")}); return err },
				"USER-invalid-query", "queries must have at most 20 entries"},
			{"ListUsers user_name",
				func() error {
					_, err := c.ListUsers(ctx, &mv1.ListUsersRequest{Queries: userQs(1, long("ü", 201))})
					return err
				},
				func() error {
					_, err := c.ListUsers(ctx, &mv1.ListUsersRequest{Queries: userQs(1, long("ü", 200))})
					return err
				},
				"USER-invalid-query", "queries[0].user_name_query.user_name must have 0 to 200 characters"},
			{"ListOrgs queries",
				func() error { _, err := c.ListOrgs(ctx, &mv1.ListOrgsRequest{Queries: orgQs(21, "a")}); return err },
				func() error { _, err := c.ListOrgs(ctx, &mv1.ListOrgsRequest{Queries: orgQs(20, "a")}); return err },
				"ORG-invalid-query", "queries must have at most 20 entries"},
			{"ListOrgs name",
				func() error {
					_, err := c.ListOrgs(ctx, &mv1.ListOrgsRequest{Queries: orgQs(1, long("n", 201))})
					return err
				},
				func() error {
					_, err := c.ListOrgs(ctx, &mv1.ListOrgsRequest{Queries: orgQs(1, long("n", 200))})
					return err
				},
				"ORG-invalid-query", "queries[0].name_query.name must have 0 to 200 characters"},
			{"ListOrgMembers queries",
				func() error {
					_, err := c.ListOrgMembers(ctx, &mv1.ListOrgMembersRequest{Queries: memberQs(21, "a")})
					return err
				},
				func() error {
					_, err := c.ListOrgMembers(ctx, &mv1.ListOrgMembersRequest{Queries: memberQs(20, "a")})
					return err
				},
				"MEMBER-invalid-query", "queries must have at most 20 entries"},
			{"ListOrgMembers first_name",
				func() error {
					_, err := c.ListOrgMembers(ctx, &mv1.ListOrgMembersRequest{Queries: memberQs(1, long("n", 201))})
					return err
				},
				func() error {
					_, err := c.ListOrgMembers(ctx, &mv1.ListOrgMembersRequest{Queries: memberQs(1, long("n", 200))})
					return err
				},
				"MEMBER-invalid-query", "queries[0].first_name_query.first_name must have 0 to 200 characters"},
			{"ListOrgIDPs queries",
				func() error {
					_, err := c.ListOrgIDPs(ctx, &mv1.ListOrgIDPsRequest{Queries: idpQs(21, "a")})
					return err
				},
				func() error {
					_, err := c.ListOrgIDPs(ctx, &mv1.ListOrgIDPsRequest{Queries: idpQs(20, "a")})
					return err
				},
				"IDP-invalid-query", "queries must have at most 20 entries"},
			{"ListOrgIDPs name",
				func() error {
					_, err := c.ListOrgIDPs(ctx, &mv1.ListOrgIDPsRequest{Queries: idpQs(1, long("n", 201))})
					return err
				},
				func() error {
					_, err := c.ListOrgIDPs(ctx, &mv1.ListOrgIDPsRequest{Queries: idpQs(1, long("n", 200))})
					return err
				},
				"IDP-invalid-query", "queries[0].idp_name_query.name must have 0 to 200 characters"},
			{"ListProjects queries",
				func() error {
					_, err := c.ListProjects(ctx, &mv1.ListProjectsRequest{Queries: projQs(21, "a")})
					return err
				},
				func() error {
					_, err := c.ListProjects(ctx, &mv1.ListProjectsRequest{Queries: projQs(20, "a")})
					return err
				},
				"PROJECT-invalid-query", "queries must have at most 20 entries"},
			{"ListProjects name",
				func() error {
					_, err := c.ListProjects(ctx, &mv1.ListProjectsRequest{Queries: projQs(1, long("n", 201))})
					return err
				},
				func() error {
					_, err := c.ListProjects(ctx, &mv1.ListProjectsRequest{Queries: projQs(1, long("n", 200))})
					return err
				},
				"PROJECT-invalid-query", "queries[0].name_query.name must have 0 to 200 characters"},
			{"ListApps queries",
				func() error {
					_, err := c.ListApps(ctx, &mv1.ListAppsRequest{ProjectId: "p", Queries: appQs(21, "a")})
					return err
				},
				func() error {
					_, err := c.ListApps(ctx, &mv1.ListAppsRequest{ProjectId: "p", Queries: appQs(20, "a")})
					return err
				},
				"APP-invalid-query", "queries must have at most 20 entries"},
			{"ListApps name",
				func() error {
					_, err := c.ListApps(ctx, &mv1.ListAppsRequest{ProjectId: "p", Queries: appQs(1, long("n", 201))})
					return err
				},
				func() error {
					_, err := c.ListApps(ctx, &mv1.ListAppsRequest{ProjectId: "p", Queries: appQs(1, long("n", 200))})
					return err
				},
				"APP-invalid-query", "queries[0].name_query.name must have 0 to 200 characters"},
			{"ListUserMetadata queries",
				func() error {
					_, err := c.ListUserMetadata(ctx, &mv1.ListUserMetadataRequest{Id: user, Queries: mdQs(21, "a")})
					return err
				},
				func() error {
					_, err := c.ListUserMetadata(ctx, &mv1.ListUserMetadataRequest{Id: user, Queries: mdQs(20, "a")})
					return err
				},
				"METADATA-invalid-query", "queries must have at most 20 entries"},
			{"ListUserMetadata key",
				func() error {
					_, err := c.ListUserMetadata(ctx, &mv1.ListUserMetadataRequest{Id: user, Queries: mdQs(1, long("k", 201))})
					return err
				},
				func() error {
					_, err := c.ListUserMetadata(ctx, &mv1.ListUserMetadataRequest{Id: user, Queries: mdQs(1, long("k", 200))})
					return err
				},
				"METADATA-invalid-query", "queries[0].key_query.key must have 0 to 200 characters"},

			// User metadata: keys 200 characters, values 500000 bytes, bulks 100.
			{"SetUserMetadata key",
				func() error {
					_, err := c.SetUserMetadata(ctx, &mv1.SetUserMetadataRequest{Id: user, Key: long("k", 201), Value: []byte("v")})
					return err
				},
				func() error {
					_, err := c.SetUserMetadata(ctx, &mv1.SetUserMetadataRequest{Id: user, Key: long("k", 200), Value: []byte("v")})
					return err
				},
				"METADATA-invalid", "key must have 1 to 200 characters"},
			{"SetUserMetadata value",
				func() error {
					_, err := c.SetUserMetadata(ctx, &mv1.SetUserMetadataRequest{Id: user, Key: "k", Value: make([]byte, 500001)})
					return err
				},
				func() error {
					_, err := c.SetUserMetadata(ctx, &mv1.SetUserMetadataRequest{Id: user, Key: "k", Value: make([]byte, 500000)})
					return err
				},
				"METADATA-invalid", "value must have at most 500000 bytes"},
			{"GetUserMetadata key",
				func() error {
					_, err := c.GetUserMetadata(ctx, &mv1.GetUserMetadataRequest{Id: user, Key: long("k", 201)})
					return err
				},
				func() error {
					_, err := c.GetUserMetadata(ctx, &mv1.GetUserMetadataRequest{Id: user, Key: long("k", 200)})
					return err
				},
				"METADATA-invalid", "key must have 1 to 200 characters"},
			{"RemoveUserMetadata key",
				func() error {
					_, err := c.RemoveUserMetadata(ctx, &mv1.RemoveUserMetadataRequest{Id: user, Key: long("k", 201)})
					return err
				},
				func() error {
					_, err := c.RemoveUserMetadata(ctx, &mv1.RemoveUserMetadataRequest{Id: user, Key: long("k", 200)})
					return err
				},
				"METADATA-invalid", "key must have 1 to 200 characters"},
			{"BulkSetUserMetadata count",
				func() error {
					_, err := c.BulkSetUserMetadata(ctx, &mv1.BulkSetUserMetadataRequest{Id: user, Metadata: entries(101, "k", []byte("v"))})
					return err
				},
				func() error {
					_, err := c.BulkSetUserMetadata(ctx, &mv1.BulkSetUserMetadataRequest{Id: user, Metadata: entries(100, "k", []byte("v"))})
					return err
				},
				"METADATA-invalid", "metadata must have 1 to 100 entries"},
			{"BulkSetUserMetadata key",
				func() error {
					_, err := c.BulkSetUserMetadata(ctx, &mv1.BulkSetUserMetadataRequest{Id: user, Metadata: entries(1, long("k", 200), []byte("v"))})
					return err
				},
				func() error {
					_, err := c.BulkSetUserMetadata(ctx, &mv1.BulkSetUserMetadataRequest{Id: user, Metadata: entries(1, long("k", 199), []byte("v"))})
					return err
				},
				"METADATA-invalid", "metadata[0].key must have 1 to 200 characters"},
			{"BulkSetUserMetadata value",
				func() error {
					_, err := c.BulkSetUserMetadata(ctx, &mv1.BulkSetUserMetadataRequest{Id: user, Metadata: entries(1, "k", make([]byte, 500001))})
					return err
				},
				func() error {
					_, err := c.BulkSetUserMetadata(ctx, &mv1.BulkSetUserMetadataRequest{Id: user, Metadata: entries(1, "k", make([]byte, 500000))})
					return err
				},
				"METADATA-invalid", "metadata[0].value must have at most 500000 bytes"},
			{"BulkRemoveUserMetadata count",
				func() error {
					_, err := c.BulkRemoveUserMetadata(ctx, &mv1.BulkRemoveUserMetadataRequest{Id: user, Keys: keys(101, "k")})
					return err
				},
				func() error {
					_, err := c.BulkRemoveUserMetadata(ctx, &mv1.BulkRemoveUserMetadataRequest{Id: user, Keys: keys(100, "k")})
					return err
				},
				"METADATA-invalid", "keys must have 1 to 100 keys"},
			{"BulkRemoveUserMetadata key",
				func() error {
					_, err := c.BulkRemoveUserMetadata(ctx, &mv1.BulkRemoveUserMetadataRequest{Id: user, Keys: keys(1, long("k", 201))})
					return err
				},
				func() error {
					_, err := c.BulkRemoveUserMetadata(ctx, &mv1.BulkRemoveUserMetadataRequest{Id: user, Keys: keys(1, long("k", 200))})
					return err
				},
				"METADATA-invalid", "keys[0] must have 1 to 200 characters"},

			// Projects and applications: names 200 characters, URIs 50 of 500, keys 10000 bytes.
			{"AddProject name",
				func() error { _, err := c.AddProject(ctx, &mv1.AddProjectRequest{Name: long("n", 201)}); return err },
				func() error { _, err := c.AddProject(ctx, &mv1.AddProjectRequest{Name: long("n", 200)}); return err },
				"PROJECT-invalid", "name must have 1 to 200 characters"},
			{"AddAPIApp name",
				func() error {
					_, err := c.AddAPIApp(ctx, &mv1.AddAPIAppRequest{ProjectId: "p", Name: long("n", 201)})
					return err
				},
				func() error {
					_, err := c.AddAPIApp(ctx, &mv1.AddAPIAppRequest{ProjectId: "p", Name: long("n", 200)})
					return err
				},
				"APP-invalid", "name must have 1 to 200 characters"},
			{"AddOIDCApp name", oidcApp(long("n", 201), nil, nil), oidcApp(long("n", 200), nil, nil),
				"APP-invalid", "name must have 1 to 200 characters"},
			{"AddOIDCApp redirect_uris", oidcApp("a", uris(51, 30), nil), oidcApp("a", uris(50, 30), nil),
				"APP-invalid", "redirect_uris must have at most 50 entries"},
			{"AddOIDCApp redirect_uris[1]", oidcApp("a", uris(2, 501), nil), oidcApp("a", uris(2, 500), nil),
				"APP-invalid", "redirect_uris[1] must have at most 500 characters"},
			{"AddOIDCApp post_logout_redirect_uris", oidcApp("a", nil, uris(51, 30)), oidcApp("a", nil, uris(50, 30)),
				"APP-invalid", "post_logout_redirect_uris must have at most 50 entries"},
			{"AddOIDCApp post_logout_redirect_uris[0]", oidcApp("a", nil, uris(1, 501)), oidcApp("a", nil, uris(1, 500)),
				"APP-invalid", "post_logout_redirect_uris[0] must have at most 500 characters"},
			{"UpdateOIDCAppConfig redirect_uris", oidcUpdate(uris(51, 30), nil), oidcUpdate(uris(50, 30), nil),
				"APP-invalid", "redirect_uris must have at most 50 entries"},
			{"UpdateOIDCAppConfig post_logout_redirect_uris[0]", oidcUpdate(nil, uris(1, 501)), oidcUpdate(nil, uris(1, 500)),
				"APP-invalid", "post_logout_redirect_uris[0] must have at most 500 characters"},
			{"AddAppKey public_key",
				func() error {
					_, err := c.AddAppKey(ctx, &mv1.AddAppKeyRequest{ProjectId: "p", AppId: "a", PublicKey: make([]byte, 10001)})
					return err
				},
				func() error {
					_, err := c.AddAppKey(ctx, &mv1.AddAppKeyRequest{ProjectId: "p", AppId: "a", PublicKey: make([]byte, 10000)})
					return err
				},
				"APP-key-invalid", "public_key must have at most 10000 bytes"},
			{"AddMachineKey public_key",
				func() error {
					_, err := c.AddMachineKey(ctx, &mv1.AddMachineKeyRequest{UserId: user, Type: mv1.KeyType_KEY_TYPE_JSON, PublicKey: make([]byte, 10001)})
					return err
				},
				func() error {
					_, err := c.AddMachineKey(ctx, &mv1.AddMachineKeyRequest{UserId: user, Type: mv1.KeyType_KEY_TYPE_JSON, PublicKey: make([]byte, 10000)})
					return err
				},
				"USER-invalid-key", "at most 10000 bytes"},
		} {
			code, id, msg := protoLimitErr(tc.past())
			if code != connect.CodeInvalidArgument || id != tc.id || strings.Count(msg, tc.msg) != 1 {
				t.Errorf("%s, one past the limit: %v %q %q; want InvalidArgument %q naming %q once", tc.name, code, id, msg, tc.id, tc.msg)
			}
			if _, _, msg := protoLimitErr(tc.at()); strings.Contains(msg, tc.msg) {
				t.Errorf("%s, at the limit: %q; want no %q", tc.name, msg, tc.msg)
			}
		}
	})
}

// protoLimitErr is the code, ErrorDetail id and message of err.
func protoLimitErr(err error) (code connect.Code, id, msg string) {
	var ce *connect.Error
	if !errors.As(err, &ce) {
		return 0, "", ""
	}
	for _, d := range ce.Details() {
		if v, err := d.Value(); err == nil {
			if ed, ok := v.(*mv1.ErrorDetail); ok {
				id = ed.GetId()
			}
		}
	}
	return ce.Code(), id, ce.Message()
}
