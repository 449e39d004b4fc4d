package management_test

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/gatehouse-id/gatehouse/pkg/db"
	managementv1 "github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/management/v1"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/mgmttest"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/storetest"
)

func TestAPIApps(t *testing.T) {
	storetest.Run(t, func(t *testing.T, d db.Dialect) {
		e := mgmttest.Start(t, d)
		ctx := context.Background()
		hasher := appHasher(t)
		projectID := appNewProject(t, e, e.AdminToken, "", "Backend")
		base := "/management/v1/projects/" + projectID + "/apps"

		// REST, BASIC: a secret once, its keyed hash stored.
		r := appOK(t, e, "AddAPIApp", "POST", base+"/api", map[string]any{"name": "orders", "authMethodType": "API_AUTH_METHOD_TYPE_BASIC"})
		evs := e.Events(projectID)
		appRESTDetails(t, "AddAPIApp", r, "", evs[len(evs)-1], e.OrgID)
		appID, secret := appStr(r.JSON["appId"]), appStr(r.JSON["clientSecret"])
		if secret == "" || !strings.HasSuffix(appStr(r.JSON["clientId"]), "@backend") ||
			!bytes.Equal(appSecretHash(t, e, appID), hasher.Hash(secret)) {
			t.Fatalf("AddAPIApp = %s", r.Body)
		}
		g := appOK(t, e, "GetAppByID", "GET", base+"/"+appID, nil)
		app, _ := g.JSON["app"].(map[string]any)
		ac, ok := app["apiConfig"].(map[string]any)
		if !ok || ac["clientId"] != r.JSON["clientId"] || app["oidcConfig"] != nil || bytes.Contains(g.Body, []byte(secret)) {
			t.Fatalf("GetAppByID = %s", g.Body)
		}
		appRESTDetails(t, "GetAppByID", g, "app", evs[len(evs)-1], e.OrgID)

		// gRPC, PRIVATE_KEY_JWT: no secret.
		c := e.Client("grpc", e.AdminToken, "")
		res, err := c.AddAPIApp(ctx, &managementv1.AddAPIAppRequest{
			ProjectId: projectID, Name: "billing", AuthMethodType: managementv1.APIAuthMethodType_API_AUTH_METHOD_TYPE_PRIVATE_KEY_JWT,
		})
		if err != nil {
			t.Fatalf("AddAPIApp over gRPC: %v", err)
		}
		evs = e.Events(projectID)
		appWriteDetails(t, "AddAPIApp over gRPC", res.GetDetails(), evs[len(evs)-1], e.OrgID)
		if res.GetClientSecret() != "" || len(appSecretHash(t, e, res.GetAppId())) != 0 {
			t.Fatalf("PRIVATE_KEY_JWT API app got a secret: %v", res)
		}
		got, err := c.GetAppByID(ctx, &managementv1.GetAppByIDRequest{ProjectId: projectID, AppId: res.GetAppId()})
		if err != nil || got.GetApp().GetApiConfig().GetAuthMethodType() != managementv1.APIAuthMethodType_API_AUTH_METHOD_TYPE_PRIVATE_KEY_JWT {
			t.Fatalf("GetAppByID over gRPC: %v %v", got, err)
		}

		// gRPC-web and Connect.
		for _, proto := range []string{"grpc-web", "connect"} {
			if _, err := e.Client(proto, e.AdminToken, "").AddAPIApp(ctx, &managementv1.AddAPIAppRequest{ProjectId: projectID, Name: "api " + proto}); err != nil {
				t.Fatalf("AddAPIApp over %s: %v", proto, err)
			}
		}

		appOK(t, e, "200-char name", "POST", base+"/api", map[string]any{"name": strings.Repeat("a", 200)})
		appRefused(t, e, "201-char name", "POST", base+"/api", map[string]any{"name": strings.Repeat("a", 201)}, 400, 3)
		appRefused(t, e, "empty name", "POST", base+"/api", map[string]any{}, 400, 3)
		appRefused(t, e, "undefined auth method", "POST", base+"/api", map[string]any{"name": "x", "authMethodType": 5}, 400, 3)
		appRefused(t, e, "name of an API app", "POST", base+"/api", map[string]any{"name": "orders"}, 409, 6)
		appRefused(t, e, "name of an OIDC app", "POST", base+"/oidc", appOIDCBody("orders"), 409, 6)
		appRefused(t, e, "unknown project", "POST", "/management/v1/projects/404/apps/api", map[string]any{"name": "x"}, 404, 5)
		appRefused(t, e, "201-char project id", "POST", "/management/v1/projects/"+strings.Repeat("9", 201)+"/apps/api", map[string]any{"name": "x"}, 400, 3)

		_, otherOwner := e.SeedOrg("API Other", "apiowner")
		theirs := appNewProject(t, e, e.Intro.Mint(otherOwner), "", "Theirs")
		appRefused(t, e, "other org's project", "POST", "/management/v1/projects/"+theirs+"/apps/api", map[string]any{"name": "x"}, 404, 5)

		e.Restart()
		if after := appOK(t, e, "GetAppByID after restart", "GET", base+"/"+appID, nil); !bytes.Equal(after.Body, g.Body) {
			t.Fatalf("after restart %s; before %s", after.Body, g.Body)
		}
	})
}
