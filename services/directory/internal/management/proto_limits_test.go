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

// The field limits of the management requests (lists, metadata, projects,
// applications, ids, users, organizations, members, IdPs, grants, the login
// policy) are protovalidate rules in the management protos (issue 25, item
// 11). One past each limit a request gets the InvalidArgument it got from
// the hand checks before: the same error id and the same field message,
// once; at the limit that message is absent. (This test passes on the code
// before the moves too: wholly before 7808e54; after it, but for the URI
// lists with repeats, which 7808e54 counted and indexed with their repeats.)
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
		type limitCase struct {
			name     string
			past, at call
			id, msg  string
		}
		cases := []limitCase{
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
		}

		// The ids, names and texts of the other requests: send(n) sends one
		// whose field has n characters (or entries), max+1 past the limit.
		str := func(n int) string { return long("i", n) }
		email := func(n int) string { return long("a", n-len("@example.com")) + "@example.com" }
		origins := func(n, length int) (os []string) {
			for i := range n {
				o := fmt.Sprintf("https://o%03d.", i)
				os = append(os, o+long("x", length-len(o)))
			}
			return os
		}
		redirect := func(n int) string { return "https://a.example/" + long("x", n-len("https://a.example/")) }
		profile := func(first, last, nick, display, lang string) *mv1.AddHumanUserRequest_Profile {
			return &mv1.AddHumanUserRequest_Profile{FirstName: first, LastName: last, NickName: nick, DisplayName: display, PreferredLanguage: lang}
		}
		human := func(userName string, p *mv1.AddHumanUserRequest_Profile, addr, phone string) error {
			_, err := c.AddHumanUser(ctx, &mv1.AddHumanUserRequest{UserName: userName, Profile: p,
				Email: &mv1.AddHumanUserRequest_Email{Email: addr}, Phone: &mv1.AddHumanUserRequest_Phone{Phone: phone}})
			return err
		}
		imported := func(userName, first, lang, addr, phone, hash string) error {
			req := &mv1.ImportHumanUserRequest{UserName: userName,
				Profile: &mv1.ImportHumanUserRequest_Profile{FirstName: first, LastName: "L", PreferredLanguage: lang},
				Email:   &mv1.ImportHumanUserRequest_Email{Email: addr}, Phone: &mv1.ImportHumanUserRequest_Phone{Phone: phone}}
			if hash != "" {
				req.HashedPassword = &mv1.ImportHumanUserRequest_HashedPassword{Value: hash}
			}
			_, err := c.ImportHumanUser(ctx, req)
			return err
		}
		machine := func(userName, name, description string) error {
			_, err := c.AddMachineUser(ctx, &mv1.AddMachineUserRequest{UserName: userName, Name: name, Description: description})
			return err
		}
		oidcOrigins := func(origins []string) error {
			_, err := c.AddOIDCApp(ctx, &mv1.AddOIDCAppRequest{ProjectId: "no-such-project", Name: "a", RedirectUris: uris(1, 30), AdditionalOrigins: origins})
			return err
		}
		oidcUpdateOrigins := func(origins []string) error {
			_, err := c.UpdateOIDCAppConfig(ctx, &mv1.UpdateOIDCAppConfigRequest{ProjectId: "no-such-project", AppId: "no-such-app", RedirectUris: uris(1, 30), AdditionalOrigins: origins})
			return err
		}
		type send func(n int) error
		for _, sc := range []struct {
			name    string
			max     int
			send    send
			id, msg string
		}{
			// The user a request names: s.user's check, whichever field.
			{"GetUserByID id", 200, func(n int) error { _, err := c.GetUserByID(ctx, &mv1.GetUserByIDRequest{Id: str(n)}); return err },
				"USER-invalid-id", "id must have 1 to 200 characters"},
			{"DeactivateUser id", 200, func(n int) error { _, err := c.DeactivateUser(ctx, &mv1.DeactivateUserRequest{Id: str(n)}); return err },
				"USER-invalid-id", "id must have 1 to 200 characters"},
			{"ReactivateUser id", 200, func(n int) error { _, err := c.ReactivateUser(ctx, &mv1.ReactivateUserRequest{Id: str(n)}); return err },
				"USER-invalid-id", "id must have 1 to 200 characters"},
			{"UnlockUser id", 200, func(n int) error { _, err := c.UnlockUser(ctx, &mv1.UnlockUserRequest{Id: str(n)}); return err },
				"USER-invalid-id", "id must have 1 to 200 characters"},
			{"RemoveUser id", 200, func(n int) error { _, err := c.RemoveUser(ctx, &mv1.RemoveUserRequest{Id: str(n)}); return err },
				"USER-invalid-id", "id must have 1 to 200 characters"},
			{"SetHumanPassword user_id", 200, func(n int) error {
				_, err := c.SetHumanPassword(ctx, &mv1.SetHumanPasswordRequest{UserId: str(n), Password: "An0ther-Passw0rd"})
				return err
			}, "USER-invalid-id", "id must have 1 to 200 characters"},
			{"AddMachineKey user_id", 200, func(n int) error {
				_, err := c.AddMachineKey(ctx, &mv1.AddMachineKeyRequest{UserId: str(n), Type: mv1.KeyType_KEY_TYPE_JSON})
				return err
			}, "USER-invalid-id", "id must have 1 to 200 characters"},
			{"ListMachineKeys user_id", 200, func(n int) error {
				_, err := c.ListMachineKeys(ctx, &mv1.ListMachineKeysRequest{UserId: str(n)})
				return err
			}, "USER-invalid-id", "id must have 1 to 200 characters"},
			{"RemoveMachineKey user_id", 200, func(n int) error {
				_, err := c.RemoveMachineKey(ctx, &mv1.RemoveMachineKeyRequest{UserId: str(n), KeyId: "k"})
				return err
			}, "USER-invalid-id", "id must have 1 to 200 characters"},
			{"RemoveMachineKey key_id", 200, func(n int) error {
				_, err := c.RemoveMachineKey(ctx, &mv1.RemoveMachineKeyRequest{UserId: user, KeyId: str(n)})
				return err
			}, "USER-invalid-key-id", "key_id must have 1 to 200 characters"},
			{"GenerateMachineSecret user_id", 200, func(n int) error {
				_, err := c.GenerateMachineSecret(ctx, &mv1.GenerateMachineSecretRequest{UserId: str(n)})
				return err
			}, "USER-invalid-id", "id must have 1 to 200 characters"},
			{"RemoveMachineSecret user_id", 200, func(n int) error {
				_, err := c.RemoveMachineSecret(ctx, &mv1.RemoveMachineSecretRequest{UserId: str(n)})
				return err
			}, "USER-invalid-id", "id must have 1 to 200 characters"},
			{"ListUserIDPs user_id", 200, func(n int) error {
				_, err := c.ListUserIDPs(ctx, &mv1.ListUserIDPsRequest{UserId: str(n)})
				return err
			}, "USER-invalid-id", "id must have 1 to 200 characters"},
			{"RemoveUserIDP user_id", 200, func(n int) error {
				_, err := c.RemoveUserIDP(ctx, &mv1.RemoveUserIDPRequest{UserId: str(n), IdpId: "i", LinkedUserId: "l"})
				return err
			}, "USER-invalid-id", "id must have 1 to 200 characters"},
			{"RemoveUserIDP idp_id", 200, func(n int) error {
				_, err := c.RemoveUserIDP(ctx, &mv1.RemoveUserIDPRequest{UserId: user, IdpId: str(n), LinkedUserId: "l"})
				return err
			}, "USER-invalid-link", "idp_id must have 1 to 200 characters"},
			{"RemoveUserIDP linked_user_id", 255, func(n int) error {
				_, err := c.RemoveUserIDP(ctx, &mv1.RemoveUserIDPRequest{UserId: user, IdpId: "i", LinkedUserId: str(n)})
				return err
			}, "USER-invalid-link", "linked_user_id must have 1 to 255 characters"},
			{"SetUserMetadata id", 200, func(n int) error {
				_, err := c.SetUserMetadata(ctx, &mv1.SetUserMetadataRequest{Id: str(n), Key: "k", Value: []byte("v")})
				return err
			}, "METADATA-invalid", "id must have 1 to 200 characters"},
			{"GetUserMetadata id", 200, func(n int) error {
				_, err := c.GetUserMetadata(ctx, &mv1.GetUserMetadataRequest{Id: str(n), Key: "k"})
				return err
			}, "METADATA-invalid", "id must have 1 to 200 characters"},
			{"RemoveUserMetadata id", 200, func(n int) error {
				_, err := c.RemoveUserMetadata(ctx, &mv1.RemoveUserMetadataRequest{Id: str(n), Key: "k"})
				return err
			}, "METADATA-invalid", "id must have 1 to 200 characters"},
			{"BulkSetUserMetadata id", 200, func(n int) error {
				_, err := c.BulkSetUserMetadata(ctx, &mv1.BulkSetUserMetadataRequest{Id: str(n), Metadata: entries(1, "k", []byte("v"))})
				return err
			}, "METADATA-invalid", "id must have 1 to 200 characters"},
			{"BulkRemoveUserMetadata id", 200, func(n int) error {
				_, err := c.BulkRemoveUserMetadata(ctx, &mv1.BulkRemoveUserMetadataRequest{Id: str(n), Keys: keys(1, "k")})
				return err
			}, "METADATA-invalid", "id must have 1 to 200 characters"},
			{"ListUserMetadata id", 200, func(n int) error {
				_, err := c.ListUserMetadata(ctx, &mv1.ListUserMetadataRequest{Id: str(n)})
				return err
			}, "METADATA-invalid-query", "id must have 1 to 200 characters"},

			// New users: user names (users.CheckUserName), profiles, addresses.
			{"AddHumanUser user_name", 200, func(n int) error { return human(long("u", n), profile("F", "L", "", "", ""), "h@example.com", "") },
				"USER-invalid", "user_name must have 1 to 200 characters"},
			{"AddHumanUser profile.first_name", 200, func(n int) error { return human("pl-h", profile(long("f", n), "L", "", "", ""), "h@example.com", "") },
				"USER-invalid", "profile.first_name must have 1 to 200 characters"},
			{"AddHumanUser profile.last_name", 200, func(n int) error { return human("pl-h", profile("F", long("l", n), "", "", ""), "h@example.com", "") },
				"USER-invalid", "profile.last_name must have 1 to 200 characters"},
			{"AddHumanUser profile.nick_name", 200, func(n int) error { return human("pl-h", profile("F", "L", long("n", n), "", ""), "h@example.com", "") },
				"USER-invalid", "profile.nick_name must have 0 to 200 characters"},
			{"AddHumanUser profile.display_name", 200, func(n int) error { return human("pl-h", profile("F", "L", "", long("d", n), ""), "h@example.com", "") },
				"USER-invalid", "profile.display_name must have 0 to 200 characters"},
			{"AddHumanUser profile.preferred_language", 10, func(n int) error { return human("pl-h", profile("F", "L", "", "", long("e", n)), "h@example.com", "") },
				"USER-invalid", "profile.preferred_language must have 0 to 10 characters"},
			{"AddHumanUser email.email", 200, func(n int) error { return human("pl-h", profile("F", "L", "", "", ""), email(n), "") },
				"USER-invalid", "email.email must have 1 to 200 characters"},
			{"AddHumanUser phone.phone", 200, func(n int) error {
				return human("pl-h", profile("F", "L", "", "", ""), "h@example.com", "+"+long("1", n-1))
			},
				"USER-invalid", "phone.phone must have 0 to 200 characters"},
			{"ImportHumanUser user_name", 200, func(n int) error { return imported(long("v", n), "F", "", "i@example.com", "", "") },
				"USER-invalid", "user_name must have 1 to 200 characters"},
			{"ImportHumanUser profile.first_name", 200, func(n int) error { return imported("pl-i", long("f", n), "", "i@example.com", "", "") },
				"USER-invalid", "profile.first_name must have 1 to 200 characters"},
			{"ImportHumanUser profile.preferred_language", 10, func(n int) error { return imported("pl-i", "F", long("e", n), "i@example.com", "", "") },
				"USER-invalid", "profile.preferred_language must have 0 to 10 characters"},
			{"ImportHumanUser email.email", 200, func(n int) error { return imported("pl-i", "F", "", email(n), "", "") },
				"USER-invalid", "email.email must have 1 to 200 characters"},
			{"ImportHumanUser phone.phone", 50, func(n int) error { return imported("pl-i", "F", "", "i@example.com", "+"+long("1", n-1), "") },
				"USER-invalid", "phone.phone must have 1 to 50 characters"},
			{"ImportHumanUser hashed_password.value", 500, func(n int) error { return imported("pl-i", "F", "", "i@example.com", "", "$2a$"+long("h", n-4)) },
				"USER-invalid", "hashed_password.value must have 1 to 500 characters"},
			{"AddMachineUser user_name", 200, func(n int) error { return machine(long("m", n), "M", "") },
				"USER-invalid", "user_name must have 1 to 200 characters"},
			{"AddMachineUser name", 200, func(n int) error { return machine("pl-m", long("n", n), "") },
				"USER-invalid", "name must have 1 to 200 characters"},
			{"AddMachineUser description", 500, func(n int) error { return machine("pl-m", "M", long("d", n)) },
				"USER-invalid", "description must have 0 to 500 characters"},

			// Organizations and members.
			{"AddOrg name", 200, func(n int) error { _, err := c.AddOrg(ctx, &mv1.AddOrgRequest{Name: long("o", n)}); return err },
				"ORG-invalid", "name must have 1 to 200 characters"},
			{"ListOrgs id_query.id", 200, func(n int) error {
				_, err := c.ListOrgs(ctx, &mv1.ListOrgsRequest{Queries: []*mv1.OrgQuery{{Query: &mv1.OrgQuery_IdQuery{IdQuery: &mv1.OrgIDQuery{Id: str(n)}}}}})
				return err
			}, "ORG-invalid-query", "queries[0].id_query.id must have 0 to 200 characters"},
			{"AddOrgMember user_id", 200, func(n int) error {
				_, err := c.AddOrgMember(ctx, &mv1.AddOrgMemberRequest{UserId: str(n), Roles: []string{"ORG_OWNER"}})
				return err
			}, "MEMBER-invalid", "user_id must have 1 to 200 characters"},
			{"RemoveOrgMember user_id", 200, func(n int) error {
				_, err := c.RemoveOrgMember(ctx, &mv1.RemoveOrgMemberRequest{UserId: str(n)})
				return err
			}, "MEMBER-invalid", "user_id must have 1 to 200 characters"},
			{"ListOrgMembers user_id_query.user_id", 200, func(n int) error {
				_, err := c.ListOrgMembers(ctx, &mv1.ListOrgMembersRequest{Queries: []*mv1.MemberQuery{
					{Query: &mv1.MemberQuery_UserIdQuery{UserIdQuery: &mv1.MemberUserIDQuery{UserId: str(n)}}}}})
				return err
			}, "MEMBER-invalid-query", "queries[0].user_id_query.user_id must have 0 to 200 characters"},

			// Identity providers: s.idp's check, and UpdateOrgIDPOIDCConfig's.
			{"GetOrgIDPByID id", 200, func(n int) error { _, err := c.GetOrgIDPByID(ctx, &mv1.GetOrgIDPByIDRequest{Id: str(n)}); return err },
				"IDP-invalid-id", "id must have 1 to 200 characters"},
			{"RemoveOrgIDP idp_id", 200, func(n int) error { _, err := c.RemoveOrgIDP(ctx, &mv1.RemoveOrgIDPRequest{IdpId: str(n)}); return err },
				"IDP-invalid-id", "idp_id must have 1 to 200 characters"},
			{"DeactivateOrgIDP idp_id", 200, func(n int) error {
				_, err := c.DeactivateOrgIDP(ctx, &mv1.DeactivateOrgIDPRequest{IdpId: str(n)})
				return err
			}, "IDP-invalid-id", "idp_id must have 1 to 200 characters"},
			{"SetOrgIDPTrust idp_id", 200, func(n int) error {
				_, err := c.SetOrgIDPTrust(ctx, &mv1.SetOrgIDPTrustRequest{IdpId: str(n)})
				return err
			},
				"IDP-invalid-id", "idp_id must have 1 to 200 characters"},
			{"ReactivateOrgIDP idp_id", 200, func(n int) error {
				_, err := c.ReactivateOrgIDP(ctx, &mv1.ReactivateOrgIDPRequest{IdpId: str(n)})
				return err
			}, "IDP-invalid-id", "idp_id must have 1 to 200 characters"},
			{"UpdateOrgIDPOIDCConfig idp_id", 200, func(n int) error {
				//lint:ignore SA1019 the deprecated OIDC provider RPCs are part of the interface (ZITADEL compatibility).
				_, err := c.UpdateOrgIDPOIDCConfig(ctx, &mv1.UpdateOrgIDPOIDCConfigRequest{IdpId: str(n), ClientId: "c", Issuer: "https://idp.example.com"})
				return err
			}, "IDP-invalid", "idp_id must have 1 to 200 characters"},

			// Projects, applications and their keys.
			{"GetProjectByID id", 200, func(n int) error { _, err := c.GetProjectByID(ctx, &mv1.GetProjectByIDRequest{Id: str(n)}); return err },
				"PROJECT-invalid-id", "id must have 1 to 200 characters"},
			{"GetAppByID project_id", 200, func(n int) error {
				_, err := c.GetAppByID(ctx, &mv1.GetAppByIDRequest{ProjectId: str(n), AppId: "a"})
				return err
			}, "APP-invalid-id", "project_id must have 1 to 200 characters"},
			{"GetAppByID app_id", 200, func(n int) error {
				_, err := c.GetAppByID(ctx, &mv1.GetAppByIDRequest{ProjectId: "p", AppId: str(n)})
				return err
			}, "APP-invalid-id", "app_id must have 1 to 200 characters"},
			{"RegenerateOIDCClientSecret app_id", 200, func(n int) error {
				_, err := c.RegenerateOIDCClientSecret(ctx, &mv1.RegenerateOIDCClientSecretRequest{ProjectId: "p", AppId: str(n)})
				return err
			}, "APP-invalid-id", "app_id must have 1 to 200 characters"},
			{"SetAppAdminClient project_id", 200, func(n int) error {
				_, err := c.SetAppAdminClient(ctx, &mv1.SetAppAdminClientRequest{ProjectId: str(n), AppId: "a"})
				return err
			}, "APP-invalid-id", "project_id must have 1 to 200 characters"},
			{"AddAppKey project_id", 200, func(n int) error {
				_, err := c.AddAppKey(ctx, &mv1.AddAppKeyRequest{ProjectId: str(n), AppId: "a", Type: mv1.KeyType_KEY_TYPE_JSON})
				return err
			}, "APP-key-invalid", "project_id must have 1 to 200 characters"},
			{"AddAppKey app_id", 200, func(n int) error {
				_, err := c.AddAppKey(ctx, &mv1.AddAppKeyRequest{ProjectId: "p", AppId: str(n), Type: mv1.KeyType_KEY_TYPE_JSON})
				return err
			}, "APP-key-invalid", "app_id must have 1 to 200 characters"},
			{"RemoveAppKey key_id", 200, func(n int) error {
				_, err := c.RemoveAppKey(ctx, &mv1.RemoveAppKeyRequest{ProjectId: "p", AppId: "a", KeyId: str(n)})
				return err
			}, "APP-key-invalid-id", "key_id must have 1 to 200 characters"},
			{"RemoveAppKey project_id", 200, func(n int) error {
				_, err := c.RemoveAppKey(ctx, &mv1.RemoveAppKeyRequest{ProjectId: str(n), AppId: "a", KeyId: "k"})
				return err
			}, "APP-key-invalid-id", "project_id must have 1 to 200 characters"},
			{"ListApps project_id", 200, func(n int) error { _, err := c.ListApps(ctx, &mv1.ListAppsRequest{ProjectId: str(n)}); return err },
				"APP-invalid-query", "project_id must have 1 to 200 characters"},
			{"AddAPIApp project_id", 200, func(n int) error {
				_, err := c.AddAPIApp(ctx, &mv1.AddAPIAppRequest{ProjectId: str(n), Name: "a"})
				return err
			}, "APP-invalid", "project_id must have 1 to 200 characters"},
			{"AddOIDCApp project_id", 200, func(n int) error {
				_, err := c.AddOIDCApp(ctx, &mv1.AddOIDCAppRequest{ProjectId: str(n), Name: "a"})
				return err
			}, "APP-invalid", "project_id must have 1 to 200 characters"},
			{"UpdateOIDCAppConfig project_id", 200, func(n int) error {
				_, err := c.UpdateOIDCAppConfig(ctx, &mv1.UpdateOIDCAppConfigRequest{ProjectId: str(n), AppId: "a"})
				return err
			}, "APP-invalid", "project_id must have 1 to 200 characters"},
			{"UpdateOIDCAppConfig app_id", 200, func(n int) error {
				_, err := c.UpdateOIDCAppConfig(ctx, &mv1.UpdateOIDCAppConfigRequest{ProjectId: "p", AppId: str(n)})
				return err
			}, "APP-invalid", "app_id must have 1 to 200 characters"},
			{"AddOIDCApp additional_origins", 50, func(n int) error { return oidcOrigins(origins(n, 30)) },
				"APP-invalid", "additional_origins must have at most 50 entries"},
			{"AddOIDCApp additional_origins[1]", 500, func(n int) error { return oidcOrigins(origins(2, n)) },
				"APP-invalid", "additional_origins[1] must have at most 500 characters"},
			{"UpdateOIDCAppConfig additional_origins", 50, func(n int) error { return oidcUpdateOrigins(origins(n, 30)) },
				"APP-invalid", "additional_origins must have at most 50 entries"},
			{"UpdateOIDCAppConfig additional_origins[0]", 500, func(n int) error { return oidcUpdateOrigins(origins(1, n)) },
				"APP-invalid", "additional_origins[0] must have at most 500 characters"},

			// Project grants.
			{"AddProjectGrant project_id", 200, func(n int) error {
				_, err := c.AddProjectGrant(ctx, &mv1.AddProjectGrantRequest{ProjectId: str(n), GrantedOrgId: "o"})
				return err
			}, "PROJECT-GRANT-invalid", "project_id must have 1 to 200 characters"},
			{"AddProjectGrant granted_org_id", 200, func(n int) error {
				_, err := c.AddProjectGrant(ctx, &mv1.AddProjectGrantRequest{ProjectId: "p", GrantedOrgId: str(n)})
				return err
			}, "PROJECT-GRANT-invalid", "granted_org_id must have 1 to 200 characters"},
			{"ListProjectGrants project_id", 200, func(n int) error {
				_, err := c.ListProjectGrants(ctx, &mv1.ListProjectGrantsRequest{ProjectId: str(n)})
				return err
			}, "PROJECT-GRANT-invalid-query", "project_id must have 1 to 200 characters"},
			{"RefuseGrantedProject project_id", 200, func(n int) error {
				_, err := c.RefuseGrantedProject(ctx, &mv1.RefuseGrantedProjectRequest{ProjectId: str(n), GrantId: "g"})
				return err
			}, "PROJECT-GRANT-invalid-id", "project_id must have 1 to 200 characters"},
			{"RefuseGrantedProject grant_id", 200, func(n int) error {
				_, err := c.RefuseGrantedProject(ctx, &mv1.RefuseGrantedProjectRequest{ProjectId: "p", GrantId: str(n)})
				return err
			}, "PROJECT-GRANT-invalid-id", "grant_id must have 1 to 200 characters"},
			{"UpdateProjectGrant grant_id", 200, func(n int) error {
				_, err := c.UpdateProjectGrant(ctx, &mv1.UpdateProjectGrantRequest{ProjectId: "p", GrantId: str(n)})
				return err
			}, "PROJECT-GRANT-invalid-id", "grant_id must have 1 to 200 characters"},
			{"RemoveProjectGrant project_id", 200, func(n int) error {
				_, err := c.RemoveProjectGrant(ctx, &mv1.RemoveProjectGrantRequest{ProjectId: str(n), GrantId: "g"})
				return err
			}, "PROJECT-GRANT-invalid-id", "project_id must have 1 to 200 characters"},
			{"RemoveProjectGrant grant_id", 200, func(n int) error {
				_, err := c.RemoveProjectGrant(ctx, &mv1.RemoveProjectGrantRequest{ProjectId: "p", GrantId: str(n)})
				return err
			}, "PROJECT-GRANT-invalid-id", "grant_id must have 1 to 200 characters"},

			// The login policy.
			{"AddCustomLoginPolicy default_redirect_uri", 200, func(n int) error {
				_, err := c.AddCustomLoginPolicy(ctx, &mv1.AddCustomLoginPolicyRequest{DefaultRedirectUri: redirect(n)})
				return err
			}, "POLICY-login-invalid", "default_redirect_uri must have 0 to 200 characters"},
			{"UpdateCustomLoginPolicy default_redirect_uri", 200, func(n int) error {
				_, err := c.UpdateCustomLoginPolicy(ctx, &mv1.UpdateCustomLoginPolicyRequest{DefaultRedirectUri: redirect(n)})
				return err
			}, "POLICY-login-invalid", "default_redirect_uri must have 0 to 200 characters"},
		} {
			cases = append(cases, limitCase{sc.name, func() error { return sc.send(sc.max + 1) }, func() error { return sc.send(sc.max) }, sc.id, sc.msg})
		}

		// A message is matched from the start of a field's ("id ..." is not
		// "user_id ...").
		for _, tc := range cases {
			code, id, msg := protoLimitErr(tc.past())
			if code != connect.CodeInvalidArgument || id != tc.id || strings.Count(" "+msg, " "+tc.msg) != 1 {
				t.Errorf("%s, one past the limit: %v %q %q; want InvalidArgument %q naming %q once", tc.name, code, id, msg, tc.id, tc.msg)
			}
			if _, _, msg := protoLimitErr(tc.at()); strings.Contains(" "+msg, " "+tc.msg) {
				t.Errorf("%s, at the limit: %q; want no %q", tc.name, msg, tc.msg)
			}
		}

		// The URI lists of an OIDC application are counted and indexed
		// without their repeats, as projects.OIDCConfig.Validate sees them:
		// 50 distinct URIs and a repeat are no more than 50, and a bad URI
		// after a repeat is named at its index among the distinct ones, once.
		repeated := func(n int) []string { return append(uris(n, 30), uris(1, 30)...) }
		for _, tc := range []struct {
			name string
			call call
			want string // the whole message; "" for no InvalidArgument
		}{
			{"AddOIDCApp redirect_uris, 50 and a repeat", oidcApp("a", repeated(50), nil), ""},
			{"AddOIDCApp post_logout_redirect_uris, 50 and a repeat", oidcApp("a", uris(1, 30), repeated(50)), ""},
			{"AddOIDCApp additional_origins, 50 and a repeat", func() error { return oidcOrigins(append(origins(50, 30), origins(1, 30)...)) }, ""},
			{"UpdateOIDCAppConfig redirect_uris, 50 and a repeat", oidcUpdate(repeated(50), nil), ""},
			{"UpdateOIDCAppConfig additional_origins, 50 and a repeat", func() error { return oidcUpdateOrigins(append(origins(50, 30), origins(1, 30)...)) }, ""},
			{"AddOIDCApp redirect_uris, long after a repeat", oidcApp("a", append(repeated(1), uris(2, 501)[1]), nil),
				"redirect_uris[1] must have at most 500 characters"},
			{"AddOIDCApp additional_origins, long after a repeat", func() error {
				return oidcOrigins(append(append(origins(1, 30), origins(1, 30)...), origins(2, 501)[1]))
			}, "additional_origins[1] must have at most 500 characters"},
			{"UpdateOIDCAppConfig post_logout_redirect_uris, long after a repeat", oidcUpdate(uris(1, 30), append(repeated(1), uris(2, 501)[1])),
				"post_logout_redirect_uris[1] must have at most 500 characters"},
		} {
			code, _, msg := protoLimitErr(tc.call())
			switch {
			case tc.want == "" && code == connect.CodeInvalidArgument:
				t.Errorf("%s: %q; want no InvalidArgument", tc.name, msg)
			case tc.want != "" && msg != tc.want:
				t.Errorf("%s: %v %q; want InvalidArgument %q alone", tc.name, code, msg, tc.want)
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
