package management_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"connectrpc.com/connect"

	"github.com/gatehouse-id/gatehouse/pkg/db"
	managementv1 "github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/management/v1"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/mgmttest"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/orgs"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/storetest"
)

// memberRolesOf reads a membership's roles from the projection (nil when
// the user is no member).
func memberRolesOf(t *testing.T, e *mgmttest.Env, orgID, userID string) []string {
	t.Helper()
	m, err := (&orgs.Queries{DB: e.DB}).Member(context.Background(), orgID, userID)
	if err != nil {
		return nil
	}
	return m.Roles()
}

func TestOrgMembersOverEveryProtocol(t *testing.T) {
	storetest.Run(t, func(t *testing.T, d db.Dialect) {
		e := mgmttest.Start(t, d)
		ctx := context.Background()
		for _, proto := range mgmttest.Protocols {
			t.Run(proto, func(t *testing.T) {
				c := e.Client(proto, e.AdminToken, "")
				userID := e.SeedUser(e.OrgID, "member-"+proto)
				token := e.Intro.Mint(userID)
				// Without a role the user cannot use the API.
				_, err := e.Client(proto, token, "").GetUserByID(ctx, &managementv1.GetUserByIDRequest{Id: userID})
				if connect.CodeOf(err) != connect.CodePermissionDenied {
					t.Fatalf("before membership: %v; want PermissionDenied", err)
				}

				add, err := c.AddOrgMember(ctx, &managementv1.AddOrgMemberRequest{UserId: userID, Roles: []string{orgs.RoleOrgUserManager}})
				if err != nil {
					t.Fatalf("AddOrgMember: %v", err)
				}
				ev := mdLast(t, e, e.OrgID)
				if ev.Type != orgs.EventOrgMemberAdded || ev.ResourceOwner != e.OrgID {
					t.Fatalf("event %s owner %s; want %s of %s", ev.Type, ev.ResourceOwner, orgs.EventOrgMemberAdded, e.OrgID)
				}
				mdWriteDetails(t, "AddOrgMember", add.GetDetails(), ev)
				if got := memberRolesOf(t, e, e.OrgID, userID); !slices.Equal(got, []string{orgs.RoleOrgUserManager}) {
					t.Fatalf("roles %v; want [ORG_USER_MANAGER]", got)
				}
				// The role takes effect at once.
				if _, err := e.Client(proto, token, "").GetUserByID(ctx, &managementv1.GetUserByIDRequest{Id: userID}); err != nil {
					t.Fatalf("as ORG_USER_MANAGER: %v", err)
				}
				// ...and is not enough to manage members.
				_, err = e.Client(proto, token, "").RemoveOrgMember(ctx, &managementv1.RemoveOrgMemberRequest{UserId: userID})
				if connect.CodeOf(err) != connect.CodePermissionDenied {
					t.Fatalf("ORG_USER_MANAGER removes a member: %v; want PermissionDenied", err)
				}

				_, err = c.AddOrgMember(ctx, &managementv1.AddOrgMemberRequest{UserId: userID, Roles: []string{orgs.RoleOrgOwner}})
				if connect.CodeOf(err) != connect.CodeAlreadyExists {
					t.Fatalf("add an existing member: %v; want AlreadyExists", err)
				}
				_, err = c.AddOrgMember(ctx, &managementv1.AddOrgMemberRequest{UserId: userID})
				if connect.CodeOf(err) != connect.CodeInvalidArgument {
					t.Fatalf("add without roles: %v; want InvalidArgument", err)
				}

				rm, err := c.RemoveOrgMember(ctx, &managementv1.RemoveOrgMemberRequest{UserId: userID})
				if err != nil {
					t.Fatalf("RemoveOrgMember: %v", err)
				}
				ev = mdLast(t, e, e.OrgID)
				if ev.Type != orgs.EventOrgMemberRemoved {
					t.Fatalf("event %s; want %s", ev.Type, orgs.EventOrgMemberRemoved)
				}
				mdWriteDetails(t, "RemoveOrgMember", rm.GetDetails(), ev)
				if got := memberRolesOf(t, e, e.OrgID, userID); got != nil {
					t.Fatalf("roles after removal %v; want none", got)
				}
				_, err = e.Client(proto, token, "").GetUserByID(ctx, &managementv1.GetUserByIDRequest{Id: userID})
				if connect.CodeOf(err) != connect.CodePermissionDenied {
					t.Fatalf("after removal: %v; want PermissionDenied", err)
				}
				_, err = c.RemoveOrgMember(ctx, &managementv1.RemoveOrgMemberRequest{UserId: userID})
				if connect.CodeOf(err) != connect.CodeNotFound {
					t.Fatalf("remove a non-member: %v; want NotFound", err)
				}
			})
		}
	})
}

func TestOrgMembersOverREST(t *testing.T) {
	storetest.Run(t, func(t *testing.T, d db.Dialect) {
		e := mgmttest.Start(t, d)
		const path = "/management/v1/orgs/me/members"
		otherOrg, otherOwner := e.SeedOrg("Other Org", "other-owner")
		outsider := e.SeedUser(otherOrg, "outsider")
		local := e.SeedUser(e.OrgID, "local")
		twice := e.SeedUser(e.OrgID, "twice")
		gone := e.SeedUser(e.OrgID, "gone")
		e.SeedMember(e.OrgID, gone, orgs.RoleOrgOwner)
		manager := e.SeedUser(e.OrgID, "manager")
		e.SeedMember(e.OrgID, manager, orgs.RoleOrgUserManager)
		id200, id201 := strings.Repeat("9", 200), strings.Repeat("9", 201)

		cases := []struct {
			name         string
			method, path string
			token, org   string
			body         any
			status       int
			detail       string
		}{
			{"no roles", "POST", path, "", "", map[string]any{"userId": local}, 400, "MEMBER-invalid"},
			{"empty roles", "POST", path, "", "", map[string]any{"userId": local, "roles": []string{}}, 400, "MEMBER-invalid"},
			{"unknown role", "POST", path, "", "", map[string]any{"userId": local, "roles": []string{"ORG_OWNER", "SUPERUSER"}}, 400, "MEMBER-invalid"},
			{"instance role", "POST", path, "", "", map[string]any{"userId": local, "roles": []string{"IAM_OWNER"}}, 400, "MEMBER-invalid"},
			{"no user id", "POST", path, "", "", map[string]any{"roles": []string{"ORG_OWNER"}}, 400, "MEMBER-invalid"},
			{"user id of 201 characters", "POST", path, "", "", map[string]any{"userId": id201, "roles": []string{"ORG_OWNER"}}, 400, "MEMBER-invalid"},
			{"unknown user id of 200 characters", "POST", path, "", "", map[string]any{"userId": id200, "roles": []string{"ORG_OWNER"}}, 404, "MEMBER-user-not-found"},
			{"malformed JSON", "POST", path, "", "", `{"userId": `, 400, ""},
			{"user manager cannot add", "POST", path, e.Intro.Mint(manager), "", map[string]any{"userId": local, "roles": []string{"ORG_OWNER"}}, 403, ""},
			{"owner of another org cannot add here", "POST", path, e.Intro.Mint(otherOwner), e.OrgID, map[string]any{"userId": local, "roles": []string{"ORG_OWNER"}}, 403, ""},
			{"add a user of this org", "POST", path, "", "", map[string]any{"userId": local, "roles": []string{"ORG_OWNER"}}, 200, ""},
			{"add a user of another org", "POST", path, "", "", map[string]any{"userId": outsider, "roles": []string{"ORG_USER_MANAGER"}}, 200, ""},
			{"a role named twice", "POST", path, "", "", map[string]any{"userId": twice, "roles": []string{"ORG_USER_MANAGER", "ORG_OWNER", "ORG_USER_MANAGER"}}, 200, ""},
			{"already a member", "POST", path, "", "", map[string]any{"userId": local, "roles": []string{"ORG_USER_MANAGER"}}, 409, "MEMBER-already-exists"},
			{"remove with an id of 201 characters", "DELETE", path + "/" + id201, "", "", nil, 400, "MEMBER-invalid"},
			{"remove a non-member", "DELETE", path + "/" + manager + "x", "", "", nil, 404, "MEMBER-not-found"},
			{"remove a member of another org", "DELETE", path + "/" + otherOwner, "", "", nil, 404, "MEMBER-not-found"},
			{"user manager cannot remove", "DELETE", path + "/" + local, e.Intro.Mint(manager), "", nil, 403, ""},
			{"remove", "DELETE", path + "/" + gone, "", "", nil, 200, ""},
			{"remove again", "DELETE", path + "/" + gone, "", "", nil, 404, "MEMBER-not-found"},
			{"IAM_OWNER adds in another org", "POST", path, "", otherOrg, map[string]any{"userId": local, "roles": []string{"ORG_USER_MANAGER"}}, 200, ""},
		}
		for _, tc := range cases {
			token := tc.token
			if token == "" {
				token = e.AdminToken
			}
			before := e.EventCount()
			r := e.REST(tc.method, tc.path, token, tc.org, tc.body)
			if r.Status != tc.status {
				t.Errorf("%s: status %d %s; want %d", tc.name, r.Status, r.Body, tc.status)
				continue
			}
			if tc.status != 200 {
				if e.EventCount() != before {
					t.Errorf("%s: refused request added %d events", tc.name, e.EventCount()-before)
				}
			} else {
				orgID := e.OrgID
				if tc.org != "" {
					orgID = tc.org
				}
				mdJSONDetails(t, tc.name, r.JSON["details"], mdLast(t, e, orgID))
			}
			if tc.detail != "" {
				if got, typ := r.Detail(); got != tc.detail || typ != "type.googleapis.com/gatehouse.management.v1.ErrorDetail" {
					t.Errorf("%s: detail %q %q; want %q ErrorDetail", tc.name, got, typ, tc.detail)
				}
			}
		}
		if got := memberRolesOf(t, e, e.OrgID, local); !slices.Equal(got, []string{orgs.RoleOrgOwner}) {
			t.Errorf("local's roles %v; want [ORG_OWNER] (the refused second add changed nothing)", got)
		}
		if got := memberRolesOf(t, e, otherOrg, local); !slices.Equal(got, []string{orgs.RoleOrgUserManager}) {
			t.Errorf("local's roles in the other org %v; want [ORG_USER_MANAGER]", got)
		}
		if got := memberRolesOf(t, e, e.OrgID, twice); !slices.Equal(got, []string{orgs.RoleOrgUserManager, orgs.RoleOrgOwner}) {
			t.Errorf("roles of a member added with a role named twice %v; want [ORG_USER_MANAGER ORG_OWNER]", got)
		}
		if got := memberRolesOf(t, e, e.OrgID, gone); got != nil {
			t.Errorf("removed member still has roles %v", got)
		}

		// A member from another organization acts here with x-service-orgid.
		outsiderToken := e.Intro.Mint(outsider)
		if r := e.REST("GET", "/management/v1/orgs/me", outsiderToken, e.OrgID, nil); r.Status != 200 {
			t.Fatalf("outsider member reads the org: %d %s", r.Status, r.Body)
		}
		if r := e.REST("GET", "/management/v1/users/"+local, outsiderToken, e.OrgID, nil); r.Status != 200 {
			t.Fatalf("outsider ORG_USER_MANAGER reads a user: %d %s", r.Status, r.Body)
		}

		// Memberships survive a restart.
		e.Restart()
		if r := e.REST("GET", "/management/v1/users/"+local, outsiderToken, e.OrgID, nil); r.Status != 200 {
			t.Fatalf("outsider after restart: %d %s", r.Status, r.Body)
		}
		if r := e.REST("POST", path, e.AdminToken, "", map[string]any{"userId": outsider, "roles": []string{"ORG_OWNER"}}); r.Status != 409 {
			t.Fatalf("re-adding a member after restart: %d; want 409", r.Status)
		}
		if r := e.REST("DELETE", path+"/"+outsider, e.AdminToken, "", nil); r.Status != 200 {
			t.Fatalf("remove after restart: %d %s", r.Status, r.Body)
		}
		if r := e.REST("GET", "/management/v1/orgs/me", outsiderToken, e.OrgID, nil); r.Status != 403 {
			t.Fatalf("removed outsider reads the org: %d; want 403", r.Status)
		}
	})
}
