package management_test

import (
	"context"
	"strings"
	"testing"

	"connectrpc.com/connect"

	"github.com/gatehouse-id/gatehouse/pkg/db"
	managementv1 "github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/management/v1"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/mgmttest"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/orgs"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/storetest"
)

func TestProjects(t *testing.T) {
	storetest.Run(t, func(t *testing.T, d db.Dialect) {
		e := mgmttest.Start(t, d)
		ctx := context.Background()

		t.Run("add and get over every protocol", func(t *testing.T) {
			for _, proto := range mgmttest.Protocols {
				c := e.Client(proto, e.AdminToken, "")
				res, err := c.AddProject(ctx, &managementv1.AddProjectRequest{
					Name: "Shop " + proto, ProjectRoleAssertion: true, HasProjectCheck: true,
					PrivateLabelingSetting: managementv1.PrivateLabelingSetting_PRIVATE_LABELING_SETTING_ENFORCE_PROJECT_RESOURCE_OWNER_POLICY,
				})
				if err != nil {
					t.Fatalf("%s AddProject: %v", proto, err)
				}
				id := res.GetId()
				evs := e.Events(id)
				if len(evs) != 1 || evs[0].Type != "project.added" {
					t.Fatalf("%s events = %v; want one project.added", proto, evs)
				}
				appWriteDetails(t, proto+" AddProject", res.GetDetails(), evs[0], e.OrgID)

				got, err := c.GetProjectByID(ctx, &managementv1.GetProjectByIDRequest{Id: id})
				if err != nil {
					t.Fatalf("%s GetProjectByID: %v", proto, err)
				}
				p := got.GetProject()
				if p.GetId() != id || p.GetName() != "Shop "+proto || p.GetState() != managementv1.ProjectState_PROJECT_STATE_ACTIVE ||
					!p.GetProjectRoleAssertion() || p.GetProjectRoleCheck() || !p.GetHasProjectCheck() ||
					p.GetPrivateLabelingSetting() != managementv1.PrivateLabelingSetting_PRIVATE_LABELING_SETTING_ENFORCE_PROJECT_RESOURCE_OWNER_POLICY {
					t.Fatalf("%s project = %v", proto, p)
				}
				appReadDetails(t, proto+" GetProjectByID", p.GetDetails(), evs[0], evs[0], e.OrgID)

				_, err = c.AddProject(ctx, &managementv1.AddProjectRequest{Name: "Shop " + proto})
				if connect.CodeOf(err) != connect.CodeAlreadyExists {
					t.Fatalf("%s duplicate name: %v; want AlreadyExists", proto, err)
				}
				_, err = c.GetProjectByID(ctx, &managementv1.GetProjectByIDRequest{Id: "404"})
				if connect.CodeOf(err) != connect.CodeNotFound {
					t.Fatalf("%s unknown project: %v; want NotFound", proto, err)
				}
				_, err = c.AddProject(ctx, &managementv1.AddProjectRequest{Name: ""})
				if connect.CodeOf(err) != connect.CodeInvalidArgument {
					t.Fatalf("%s empty name: %v; want InvalidArgument", proto, err)
				}
			}
		})

		t.Run("REST and limits", func(t *testing.T) {
			r := appOK(t, e, "AddProject", "POST", "/management/v1/projects", map[string]any{
				"name": "Portal", "projectRoleCheck": true, "privateLabelingSetting": "PRIVATE_LABELING_SETTING_ALLOW_LOGIN_USER_RESOURCE_OWNER_POLICY",
			})
			id := appStr(r.JSON["id"])
			evs := e.Events(id)
			appRESTDetails(t, "AddProject", r, "", evs[0], e.OrgID)
			g := appOK(t, e, "GetProjectByID", "GET", "/management/v1/projects/"+id, nil)
			p, _ := g.JSON["project"].(map[string]any)
			if p["name"] != "Portal" || p["state"] != "PROJECT_STATE_ACTIVE" || p["projectRoleCheck"] != true ||
				p["privateLabelingSetting"] != "PRIVATE_LABELING_SETTING_ALLOW_LOGIN_USER_RESOURCE_OWNER_POLICY" {
				t.Fatalf("GetProjectByID = %s", g.Body)
			}
			appRESTDetails(t, "GetProjectByID", g, "project", evs[0], e.OrgID)

			appOK(t, e, "1-char name", "POST", "/management/v1/projects", map[string]any{"name": "x"})
			appOK(t, e, "200-char name", "POST", "/management/v1/projects", map[string]any{"name": strings.Repeat("n", 200)})
			appOK(t, e, "200 multi-byte characters", "POST", "/management/v1/projects", map[string]any{"name": strings.Repeat("ü", 200)})
			appRefused(t, e, "201-char name", "POST", "/management/v1/projects", map[string]any{"name": strings.Repeat("n", 201)}, 400, 3)
			appRefused(t, e, "empty name", "POST", "/management/v1/projects", map[string]any{"name": ""}, 400, 3)
			appRefused(t, e, "blank name", "POST", "/management/v1/projects", map[string]any{"name": "   "}, 400, 3)
			appRefused(t, e, "undefined labeling setting", "POST", "/management/v1/projects", map[string]any{"name": "L", "privateLabelingSetting": 7}, 400, 3)
			appRefused(t, e, "duplicate name", "POST", "/management/v1/projects", map[string]any{"name": "Portal"}, 409, 6)
			// vanguard's decoding error carries no ErrorDetail (api package), so
			// only status, code and "no events" are checked here.
			before := e.EventCount()
			if r := e.REST("POST", "/management/v1/projects", e.AdminToken, "", `{"name":`); r.Status != 400 || r.Code() != 3 || e.EventCount() != before {
				t.Fatalf("malformed JSON: %d %s; want 400 InvalidArgument, no events", r.Status, r.Body)
			}
			appRefused(t, e, "201-char id", "GET", "/management/v1/projects/"+strings.Repeat("1", 201), nil, 400, 3)
			appRefused(t, e, "unknown 200-char id", "GET", "/management/v1/projects/"+strings.Repeat("1", 200), nil, 404, 5)
		})

		t.Run("organizations and roles", func(t *testing.T) {
			otherOrg, otherOwner := e.SeedOrg("Projects Other", "powner")
			ownerToken := e.Intro.Mint(otherOwner)
			theirs := appNewProject(t, e, ownerToken, "", "Portal") // same name as ours: unique per org only
			if r := e.REST("GET", "/management/v1/projects/"+theirs, e.AdminToken, "", nil); r.Status != 404 {
				t.Fatalf("other org's project without header: %d; want 404", r.Status)
			}
			if _, err := e.Client("grpc", e.AdminToken, "").GetProjectByID(ctx, &managementv1.GetProjectByIDRequest{Id: theirs}); connect.CodeOf(err) != connect.CodeNotFound {
				t.Fatalf("other org's project over gRPC: %v; want NotFound", err)
			}
			if r := e.REST("GET", "/management/v1/projects/"+theirs, e.AdminToken, otherOrg, nil); r.Status != 200 {
				t.Fatalf("IAM_OWNER with x-service-orgid: %d %s", r.Status, r.Body)
			}
			if r := e.REST("POST", "/management/v1/projects", ownerToken, e.OrgID, map[string]any{"name": "Intrude"}); r.Status != 403 {
				t.Fatalf("owner of another org: %d; want 403", r.Status)
			}
			manager := e.SeedUser(e.OrgID, "pmanager")
			e.SeedMember(e.OrgID, manager, orgs.RoleOrgUserManager)
			before := e.EventCount()
			if r := e.REST("POST", "/management/v1/projects", e.Intro.Mint(manager), "", map[string]any{"name": "Managed"}); r.Status != 403 || r.Code() != 7 {
				t.Fatalf("ORG_USER_MANAGER AddProject: %d %s; want 403", r.Status, r.Body)
			}
			if e.EventCount() != before {
				t.Fatal("refused AddProject added events")
			}
		})

		t.Run("restart keeps projects", func(t *testing.T) {
			id := appNewProject(t, e, e.AdminToken, "", "Durable")
			evs := e.Events(id)
			e.Restart()
			res, err := e.Client("grpc-web", e.AdminToken, "").GetProjectByID(ctx, &managementv1.GetProjectByIDRequest{Id: id})
			if err != nil {
				t.Fatalf("GetProjectByID after restart: %v", err)
			}
			if res.GetProject().GetName() != "Durable" {
				t.Fatalf("project after restart = %v", res.GetProject())
			}
			appReadDetails(t, "after restart", res.GetProject().GetDetails(), evs[0], evs[0], e.OrgID)
		})
	})
}
