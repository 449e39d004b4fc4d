package management_test

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/gatehouse-id/gatehouse/pkg/db"
	managementv1 "github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/management/v1"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/mgmttest"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/storetest"
)

// appOIDCBody is a valid AddOIDCApp/UpdateOIDCAppConfig REST body, changed
// by mods.
func appOIDCBody(name string, mods ...func(map[string]any)) map[string]any {
	b := map[string]any{
		"redirectUris":   []string{"https://app.example.com/cb"},
		"responseTypes":  []string{"OIDC_RESPONSE_TYPE_CODE"},
		"grantTypes":     []string{"OIDC_GRANT_TYPE_AUTHORIZATION_CODE", "OIDC_GRANT_TYPE_REFRESH_TOKEN"},
		"appType":        "OIDC_APP_TYPE_WEB",
		"authMethodType": "OIDC_AUTH_METHOD_TYPE_BASIC",
	}
	if name != "" {
		b["name"] = name
	}
	for _, m := range mods {
		m(b)
	}
	return b
}

func appSet(k string, v any) func(map[string]any) { return func(b map[string]any) { b[k] = v } }

func appURIs(n, length int) []string {
	out := make([]string, n)
	for i := range out {
		prefix := fmt.Sprintf("https://app.example.com/%03d/", i)
		out[i] = prefix + strings.Repeat("a", length-len(prefix))
	}
	return out
}

func appSecretHash(t *testing.T, e *mgmttest.Env, appID string) []byte {
	t.Helper()
	var h []byte
	if err := e.DB.Get(context.Background(), &h, `SELECT secret_hash FROM apps WHERE id = ?`, appID); err != nil {
		t.Fatal(err)
	}
	return h
}

func appProblemKeys(r *mgmttest.Response, key string) []string {
	obj := r.JSON
	if key != "" {
		app, _ := r.JSON["app"].(map[string]any)
		obj, _ = app[key].(map[string]any)
	}
	var out []string
	ps, _ := obj["complianceProblems"].([]any)
	for _, p := range ps {
		m, _ := p.(map[string]any)
		out = append(out, appStr(m["key"]))
	}
	return out
}

func TestOIDCApps(t *testing.T) {
	storetest.Run(t, func(t *testing.T, d db.Dialect) {
		e := mgmttest.Start(t, d)
		ctx := context.Background()
		hasher := appHasher(t)
		projectID := appNewProject(t, e, e.AdminToken, "", "Web Shop")
		base := "/management/v1/projects/" + projectID + "/apps"

		t.Run("add and get over every protocol", func(t *testing.T) {
			for _, proto := range mgmttest.Protocols {
				c := e.Client(proto, e.AdminToken, "")
				res, err := c.AddOIDCApp(ctx, &managementv1.AddOIDCAppRequest{
					ProjectId:                projectID,
					Name:                     "web " + proto,
					RedirectUris:             []string{"https://app.example.com/cb", "http://localhost:3000/cb"},
					ResponseTypes:            []managementv1.OIDCResponseType{managementv1.OIDCResponseType_OIDC_RESPONSE_TYPE_CODE},
					GrantTypes:               []managementv1.OIDCGrantType{managementv1.OIDCGrantType_OIDC_GRANT_TYPE_AUTHORIZATION_CODE, managementv1.OIDCGrantType_OIDC_GRANT_TYPE_REFRESH_TOKEN},
					AuthMethodType:           managementv1.OIDCAuthMethodType_OIDC_AUTH_METHOD_TYPE_POST,
					PostLogoutRedirectUris:   []string{"https://app.example.com/bye"},
					AccessTokenType:          managementv1.OIDCTokenType_OIDC_TOKEN_TYPE_JWT,
					IdTokenUserinfoAssertion: true,
					ClockSkew:                durationpb.New(2 * time.Second),
					AdditionalOrigins:        []string{"https://extra.example.com"},
					LoginVersion:             &managementv1.LoginVersion{Version: &managementv1.LoginVersion_LoginV1{LoginV1: &managementv1.LoginV1{}}},
				})
				if err != nil {
					t.Fatalf("%s AddOIDCApp: %v", proto, err)
				}
				m := res
				evs := e.Events(projectID)
				last := evs[len(evs)-1]
				if last.Type != "project.application.added" {
					t.Fatalf("%s last event %s", proto, last.Type)
				}
				appWriteDetails(t, proto+" AddOIDCApp", m.GetDetails(), last, e.OrgID)
				if m.GetAppId() == "" || !strings.HasSuffix(m.GetClientId(), "@web-shop") || len(m.GetClientSecret()) < 40 || m.GetNoneCompliant() {
					t.Fatalf("%s AddOIDCApp = %v", proto, m)
				}
				if !bytes.Equal(appSecretHash(t, e, m.GetAppId()), hasher.Hash(m.GetClientSecret())) {
					t.Fatalf("%s: stored secret hash is not the keyed hash of the returned secret", proto)
				}
				if bytes.Contains(last.Payload, []byte(m.GetClientSecret())) {
					t.Fatalf("%s: the event payload contains the clear secret", proto)
				}

				got, err := c.GetAppByID(ctx, &managementv1.GetAppByIDRequest{ProjectId: projectID, AppId: m.GetAppId()})
				if err != nil {
					t.Fatalf("%s GetAppByID: %v", proto, err)
				}
				app := got.GetApp()
				if strings.Contains(got.String(), m.GetClientSecret()) {
					t.Fatalf("%s GetAppByID returned the secret", proto)
				}
				appReadDetails(t, proto+" GetAppByID", app.GetDetails(), last, last, e.OrgID)
				oc := app.GetOidcConfig()
				if app.GetName() != "web "+proto || app.GetState() != managementv1.AppState_APP_STATE_ACTIVE || oc.GetClientId() != m.GetClientId() ||
					!slices.Equal(oc.GetRedirectUris(), []string{"https://app.example.com/cb", "http://localhost:3000/cb"}) ||
					oc.GetAuthMethodType() != managementv1.OIDCAuthMethodType_OIDC_AUTH_METHOD_TYPE_POST ||
					len(oc.GetGrantTypes()) != 2 || oc.GetGrantTypes()[1] != managementv1.OIDCGrantType_OIDC_GRANT_TYPE_REFRESH_TOKEN ||
					oc.GetAccessTokenType() != managementv1.OIDCTokenType_OIDC_TOKEN_TYPE_JWT || !oc.GetIdTokenUserinfoAssertion() ||
					oc.GetClockSkew().AsDuration() != 2*time.Second || oc.GetLoginVersion().GetLoginV1() == nil || oc.GetNoneCompliant() ||
					!slices.Equal(oc.GetAllowedOrigins(), []string{"https://app.example.com", "http://localhost:3000", "https://extra.example.com"}) ||
					!slices.Equal(oc.GetPostLogoutRedirectUris(), []string{"https://app.example.com/bye"}) {
					t.Fatalf("%s app = %v", proto, app)
				}
				_, err = c.GetAppByID(ctx, &managementv1.GetAppByIDRequest{ProjectId: projectID, AppId: "404"})
				if connect.CodeOf(err) != connect.CodeNotFound {
					t.Fatalf("%s unknown app: %v; want NotFound", proto, err)
				}
				_, err = c.AddOIDCApp(ctx, &managementv1.AddOIDCAppRequest{ProjectId: projectID, Name: "web " + proto,
					RedirectUris: []string{"https://app.example.com/cb"}})
				if connect.CodeOf(err) != connect.CodeAlreadyExists {
					t.Fatalf("%s duplicate app name: %v; want AlreadyExists", proto, err)
				}
				_, err = c.AddOIDCApp(ctx, &managementv1.AddOIDCAppRequest{ProjectId: projectID, Name: "no uris"})
				if connect.CodeOf(err) != connect.CodeInvalidArgument {
					t.Fatalf("%s no redirect URIs: %v; want InvalidArgument", proto, err)
				}
			}
		})

		t.Run("REST, secrets per auth method", func(t *testing.T) {
			r := appOK(t, e, "AddOIDCApp", "POST", base+"/oidc", appOIDCBody("rest web"))
			evs := e.Events(projectID)
			appRESTDetails(t, "AddOIDCApp", r, "", evs[len(evs)-1], e.OrgID)
			appID, secret := appStr(r.JSON["appId"]), appStr(r.JSON["clientSecret"])
			if secret == "" || r.JSON["noneCompliant"] == true {
				t.Fatalf("AddOIDCApp = %s", r.Body)
			}
			g := appOK(t, e, "GetAppByID", "GET", base+"/"+appID, nil)
			if bytes.Contains(g.Body, []byte(secret)) || bytes.Contains(g.Body, []byte("clientSecret")) {
				t.Fatalf("GetAppByID returned a secret: %s", g.Body)
			}
			app, _ := g.JSON["app"].(map[string]any)
			oc, _ := app["oidcConfig"].(map[string]any)
			// BASIC and WEB are zero values: omitted unless unpopulated fields are emitted.
			if oc["clientId"] != r.JSON["clientId"] || (oc["authMethodType"] != nil && oc["authMethodType"] != "OIDC_AUTH_METHOD_TYPE_BASIC") ||
				(oc["appType"] != nil && oc["appType"] != "OIDC_APP_TYPE_WEB") || oc["redirectUris"].([]any)[0] != "https://app.example.com/cb" {
				t.Fatalf("GetAppByID = %s", g.Body)
			}
			appRESTDetails(t, "GetAppByID", g, "app", evs[len(evs)-1], e.OrgID)

			for _, tc := range []struct {
				method, appType string
				secret          bool
			}{
				{"OIDC_AUTH_METHOD_TYPE_POST", "OIDC_APP_TYPE_WEB", true},
				{"OIDC_AUTH_METHOD_TYPE_NONE", "OIDC_APP_TYPE_USER_AGENT", false},
				{"OIDC_AUTH_METHOD_TYPE_PRIVATE_KEY_JWT", "OIDC_APP_TYPE_WEB", false},
			} {
				r := appOK(t, e, tc.method, "POST", base+"/oidc", appOIDCBody("m "+tc.method, appSet("authMethodType", tc.method), appSet("appType", tc.appType)))
				if got := appStr(r.JSON["clientSecret"]) != ""; got != tc.secret {
					t.Fatalf("%s: secret returned %v; want %v", tc.method, got, tc.secret)
				}
				if h := appSecretHash(t, e, appStr(r.JSON["appId"])); (len(h) > 0) != tc.secret {
					t.Fatalf("%s: stored secret hash %x", tc.method, h)
				}
			}
		})

		t.Run("limits", func(t *testing.T) {
			oidc := base + "/oidc"
			ok := func(name string, mods ...func(map[string]any)) {
				appOK(t, e, name, "POST", oidc, appOIDCBody("ok "+name, mods...))
			}
			bad := func(name string, mods ...func(map[string]any)) {
				appRefused(t, e, name, "POST", oidc, appOIDCBody("bad "+name, mods...), 400, 3)
			}
			ok("200-char name", appSet("name", strings.Repeat("n", 200)))
			bad("201-char name", appSet("name", strings.Repeat("n", 201)))
			bad("empty name", appSet("name", ""))
			ok("50 redirect URIs of 500 characters", appSet("redirectUris", appURIs(50, 500)))
			bad("51 redirect URIs", appSet("redirectUris", appURIs(51, 40)))
			bad("501-character redirect URI", appSet("redirectUris", appURIs(1, 501)))
			bad("redirect URI with fragment", appSet("redirectUris", []string{"https://app.example.com/cb#x"}))
			bad("relative redirect URI", appSet("redirectUris", []string{"/cb"}))
			bad("redirect URI with space", appSet("redirectUris", []string{"https://app.example.com/c b"}))
			bad("no redirect URI", appSet("redirectUris", []string{}))
			ok("50 post-logout URIs of 500 characters", appSet("postLogoutRedirectUris", appURIs(50, 500)))
			bad("51 post-logout URIs", appSet("postLogoutRedirectUris", appURIs(51, 40)))
			bad("501-character post-logout URI", appSet("postLogoutRedirectUris", appURIs(1, 501)))
			bad("relative post-logout URI", appSet("postLogoutRedirectUris", []string{"bye"}))
			ok("clock skew 5s", appSet("clockSkew", "5s"))
			bad("clock skew 5s+1ns", appSet("clockSkew", "5.000000001s"))
			bad("negative clock skew", appSet("clockSkew", "-1s"))
			ok("device code grant", appSet("grantTypes", []string{"OIDC_GRANT_TYPE_AUTHORIZATION_CODE", "OIDC_GRANT_TYPE_DEVICE_CODE"}))
			ok("device code grant alone", appSet("grantTypes", []string{"OIDC_GRANT_TYPE_DEVICE_CODE", "OIDC_GRANT_TYPE_REFRESH_TOKEN"}),
				appSet("redirectUris", []string{}))
			ok("token exchange grant", appSet("grantTypes", []string{"OIDC_GRANT_TYPE_AUTHORIZATION_CODE", "OIDC_GRANT_TYPE_TOKEN_EXCHANGE"}))
			bad("token exchange grant, public client", appSet("grantTypes", []string{"OIDC_GRANT_TYPE_AUTHORIZATION_CODE", "OIDC_GRANT_TYPE_TOKEN_EXCHANGE"}),
				appSet("authMethodType", "OIDC_AUTH_METHOD_TYPE_NONE"))
			bad("id_token without implicit", appSet("responseTypes", []string{"OIDC_RESPONSE_TYPE_CODE", "OIDC_RESPONSE_TYPE_ID_TOKEN"}))
			bad("code without authorization_code", appSet("grantTypes", []string{"OIDC_GRANT_TYPE_IMPLICIT"}))
			bad("refresh without authorization_code", appSet("responseTypes", []string{"OIDC_RESPONSE_TYPE_ID_TOKEN_TOKEN"}),
				appSet("grantTypes", []string{"OIDC_GRANT_TYPE_IMPLICIT", "OIDC_GRANT_TYPE_REFRESH_TOKEN"}))
			ok("implicit", appSet("responseTypes", []string{"OIDC_RESPONSE_TYPE_ID_TOKEN", "OIDC_RESPONSE_TYPE_ID_TOKEN_TOKEN"}),
				appSet("grantTypes", []string{"OIDC_GRANT_TYPE_IMPLICIT"}), appSet("appType", "OIDC_APP_TYPE_USER_AGENT"),
				appSet("authMethodType", "OIDC_AUTH_METHOD_TYPE_NONE"))
			bad("undefined app type", appSet("appType", 9))
			bad("undefined auth method", appSet("authMethodType", 9))
			bad("undefined response type", appSet("responseTypes", []int{9}))
			bad("undefined token type", appSet("accessTokenType", 9))
			bad("undefined version", appSet("version", 1))
			bad("login v2", appSet("loginVersion", map[string]any{"loginV2": map[string]any{}}))
			ok("50 additional origins", appSet("additionalOrigins", func() []string {
				o := make([]string, 50)
				for i := range o {
					o[i] = fmt.Sprintf("https://o%d.example.com:8443", i)
				}
				return o
			}()))
			bad("51 additional origins", appSet("additionalOrigins", func() []string {
				o := make([]string, 51)
				for i := range o {
					o[i] = fmt.Sprintf("https://o%d.example.com", i)
				}
				return o
			}()))
			bad("origin with path", appSet("additionalOrigins", []string{"https://o.example.com/path"}))
			ok("500-character back-channel logout URI", appSet("backChannelLogoutUri", appURIs(1, 500)[0]))
			bad("501-character back-channel logout URI", appSet("backChannelLogoutUri", appURIs(1, 501)[0]))
			bad("relative back-channel logout URI", appSet("backChannelLogoutUri", "logout"))
			appRefused(t, e, "201-char project id", "POST", "/management/v1/projects/"+strings.Repeat("1", 201)+"/apps/oidc", appOIDCBody("x"), 400, 3)
			appRefused(t, e, "unknown project", "POST", "/management/v1/projects/404/apps/oidc", appOIDCBody("x"), 404, 5)
			appRefused(t, e, "duplicate name", "POST", oidc, appOIDCBody("ok implicit"), 409, 6)
			appRefused(t, e, "201-char app id", "GET", base+"/"+strings.Repeat("1", 201), nil, 400, 3)
			appRefused(t, e, "unknown app", "GET", base+"/"+strings.Repeat("1", 200), nil, 404, 5)
		})

		t.Run("compliance", func(t *testing.T) {
			cases := []struct {
				name     string
				mods     []func(map[string]any)
				problems []string
			}{
				{"https web", nil, nil},
				{"http loopback", []func(map[string]any){appSet("redirectUris", []string{"http://127.0.0.1:8080/cb", "http://localhost/cb"})}, nil},
				{"http outside dev mode", []func(map[string]any){appSet("redirectUris", []string{"http://app.example.com/cb"})},
					[]string{"Application.OIDC.V1.NotCompliant", "Application.OIDC.V1.RedirectUris.HttpOnlyForDevMode"}},
				{"http in dev mode", []func(map[string]any){appSet("redirectUris", []string{"http://app.example.com/cb"}), appSet("devMode", true)}, nil},
				{"custom scheme on web", []func(map[string]any){appSet("redirectUris", []string{"com.example.app:/cb"})},
					[]string{"Application.OIDC.V1.NotCompliant", "Application.OIDC.V1.Code.RedirectUris.CustomOnlyForNative"}},
				{"native with custom scheme", []func(map[string]any){appSet("redirectUris", []string{"com.example.app:/cb"}),
					appSet("appType", "OIDC_APP_TYPE_NATIVE"), appSet("authMethodType", "OIDC_AUTH_METHOD_TYPE_NONE")}, nil},
				{"native with secret", []func(map[string]any){appSet("appType", "OIDC_APP_TYPE_NATIVE")},
					[]string{"Application.OIDC.V1.NotCompliant", "Application.OIDC.V1.Native.AuthMethodType.NotNone"}},
			}
			for _, tc := range cases {
				r := appOK(t, e, tc.name, "POST", base+"/oidc", appOIDCBody("compliance "+tc.name, tc.mods...))
				if got := appProblemKeys(r, ""); !slices.Equal(got, tc.problems) || (r.JSON["noneCompliant"] == true) != (len(tc.problems) > 0) {
					t.Fatalf("%s: problems %v noneCompliant %v; want %v", tc.name, got, r.JSON["noneCompliant"], tc.problems)
				}
				g := appOK(t, e, tc.name, "GET", base+"/"+appStr(r.JSON["appId"]), nil)
				if got := appProblemKeys(g, "oidcConfig"); !slices.Equal(got, tc.problems) {
					t.Fatalf("%s read: problems %v; want %v", tc.name, got, tc.problems)
				}
			}
		})

		t.Run("update config", func(t *testing.T) {
			r := appOK(t, e, "AddOIDCApp", "POST", base+"/oidc", appOIDCBody("to update",
				appSet("postLogoutRedirectUris", []string{"https://app.example.com/bye"}), appSet("devMode", true)))
			appID, clientID := appStr(r.JSON["appId"]), appStr(r.JSON["clientId"])
			hash := appSecretHash(t, e, appID)
			added := e.Events(projectID)
			first := added[len(added)-1]
			path := base + "/" + appID + "/oidc_config"

			body := appOIDCBody("", appSet("redirectUris", []string{"https://new.example.com/cb"}), appSet("accessTokenType", "OIDC_TOKEN_TYPE_JWT"))
			u := appOK(t, e, "UpdateOIDCAppConfig", "PUT", path, body)
			evs := e.Events(projectID)
			last := evs[len(evs)-1]
			if last.Type != "project.application.config.oidc.changed" {
				t.Fatalf("last event %s", last.Type)
			}
			appRESTDetails(t, "UpdateOIDCAppConfig", u, "", last, e.OrgID)
			got, err := e.Client("grpc", e.AdminToken, "").GetAppByID(ctx, &managementv1.GetAppByIDRequest{ProjectId: projectID, AppId: appID})
			if err != nil {
				t.Fatal(err)
			}
			oc := got.GetApp().GetOidcConfig()
			if !slices.Equal(oc.GetRedirectUris(), []string{"https://new.example.com/cb"}) || len(oc.GetPostLogoutRedirectUris()) != 0 ||
				oc.GetDevMode() || oc.GetAccessTokenType() != managementv1.OIDCTokenType_OIDC_TOKEN_TYPE_JWT || oc.GetClientId() != clientID {
				t.Fatalf("after update: %v", oc)
			}
			appReadDetails(t, "GetAppByID after update", got.GetApp().GetDetails(), first, last, e.OrgID)
			if !bytes.Equal(appSecretHash(t, e, appID), hash) {
				t.Fatal("update changed the client secret")
			}
			// The project's own details stay those of its creation.
			p := appOK(t, e, "GetProjectByID", "GET", "/management/v1/projects/"+projectID, nil)
			appRESTDetails(t, "project after app changes", p, "project", e.Events(projectID)[0], e.OrgID)

			appRefused(t, e, "unchanged config", "PUT", path, body, 409, 10)
			appRefused(t, e, "invalid config", "PUT", path, appOIDCBody("", appSet("redirectUris", []string{"nope"})), 400, 3)
			appRefused(t, e, "unknown app", "PUT", base+"/404/oidc_config", body, 404, 5)
			api := appOK(t, e, "AddAPIApp", "POST", base+"/api", map[string]any{"name": "api for update"})
			appRefused(t, e, "API app", "PUT", base+"/"+appStr(api.JSON["appId"])+"/oidc_config", body, 404, 5)
			appRefused(t, e, "201-char app id", "PUT", base+"/"+strings.Repeat("1", 201)+"/oidc_config", body, 400, 3)

			// Over Connect: a second change is accepted.
			_, err = e.Client("connect", e.AdminToken, "").UpdateOIDCAppConfig(ctx, &managementv1.UpdateOIDCAppConfigRequest{
				ProjectId: projectID, AppId: appID, RedirectUris: []string{"https://third.example.com/cb"},
			})
			if err != nil {
				t.Fatalf("UpdateOIDCAppConfig over Connect: %v", err)
			}
		})

		t.Run("regenerate secret", func(t *testing.T) {
			r := appOK(t, e, "AddOIDCApp", "POST", base+"/oidc", appOIDCBody("regen"))
			appID, old := appStr(r.JSON["appId"]), appStr(r.JSON["clientSecret"])
			path := base + "/" + appID + "/oidc_config/_generate_client_secret"
			g := appOK(t, e, "RegenerateOIDCClientSecret", "POST", path, map[string]any{})
			evs := e.Events(projectID)
			appRESTDetails(t, "RegenerateOIDCClientSecret", g, "", evs[len(evs)-1], e.OrgID)
			secret := appStr(g.JSON["clientSecret"])
			if secret == "" || secret == old || !bytes.Equal(appSecretHash(t, e, appID), hasher.Hash(secret)) {
				t.Fatalf("regenerated secret %q (old %q) does not match the stored hash", secret, old)
			}
			if b := appOK(t, e, "GetAppByID", "GET", base+"/"+appID, nil).Body; bytes.Contains(b, []byte(secret)) {
				t.Fatal("GetAppByID returned the regenerated secret")
			}
			res, err := e.Client("grpc", e.AdminToken, "").RegenerateOIDCClientSecret(ctx, &managementv1.RegenerateOIDCClientSecretRequest{ProjectId: projectID, AppId: appID})
			if err != nil || res.GetClientSecret() == secret || !bytes.Equal(appSecretHash(t, e, appID), hasher.Hash(res.GetClientSecret())) {
				t.Fatalf("RegenerateOIDCClientSecret over gRPC: %v", err)
			}

			none := appOK(t, e, "AddOIDCApp", "POST", base+"/oidc", appOIDCBody("regen none", appSet("authMethodType", "OIDC_AUTH_METHOD_TYPE_NONE")))
			appRefused(t, e, "auth method NONE", "POST", base+"/"+appStr(none.JSON["appId"])+"/oidc_config/_generate_client_secret", map[string]any{}, 409, 10)
			pk := appOK(t, e, "AddOIDCApp", "POST", base+"/oidc", appOIDCBody("regen pk", appSet("authMethodType", "OIDC_AUTH_METHOD_TYPE_PRIVATE_KEY_JWT")))
			appRefused(t, e, "auth method PRIVATE_KEY_JWT", "POST", base+"/"+appStr(pk.JSON["appId"])+"/oidc_config/_generate_client_secret", map[string]any{}, 409, 10)
			api := appOK(t, e, "AddAPIApp", "POST", base+"/api", map[string]any{"name": "api for regen"})
			appRefused(t, e, "API app", "POST", base+"/"+appStr(api.JSON["appId"])+"/oidc_config/_generate_client_secret", map[string]any{}, 404, 5)
			appRefused(t, e, "unknown app", "POST", base+"/404/oidc_config/_generate_client_secret", map[string]any{}, 404, 5)
		})

		t.Run("other organizations", func(t *testing.T) {
			otherOrg, otherOwner := e.SeedOrg("Apps Other", "aowner")
			token := e.Intro.Mint(otherOwner)
			theirProject := appNewProject(t, e, token, "", "Theirs")
			r := e.REST("POST", "/management/v1/projects/"+theirProject+"/apps/oidc", token, "", appOIDCBody("their app"))
			if r.Status != 200 {
				t.Fatalf("other owner AddOIDCApp: %d %s", r.Status, r.Body)
			}
			theirApp := appStr(r.JSON["appId"])
			theirBase := "/management/v1/projects/" + theirProject + "/apps"
			appRefused(t, e, "add to other org's project", "POST", theirBase+"/oidc", appOIDCBody("intrude"), 404, 5)
			appRefused(t, e, "get other org's app", "GET", theirBase+"/"+theirApp, nil, 404, 5)
			appRefused(t, e, "update other org's app", "PUT", theirBase+"/"+theirApp+"/oidc_config", appOIDCBody(""), 404, 5)
			appRefused(t, e, "regenerate other org's secret", "POST", theirBase+"/"+theirApp+"/oidc_config/_generate_client_secret", map[string]any{}, 404, 5)
			appRefused(t, e, "app through another project", "GET", base+"/"+theirApp, nil, 404, 5)
			if r := e.REST("GET", theirBase+"/"+theirApp, e.AdminToken, otherOrg, nil); r.Status != 200 {
				t.Fatalf("IAM_OWNER with x-service-orgid: %d %s", r.Status, r.Body)
			}
		})

		t.Run("restart keeps apps", func(t *testing.T) {
			r := appOK(t, e, "AddOIDCApp", "POST", base+"/oidc", appOIDCBody("durable"))
			appID := appStr(r.JSON["appId"])
			before := appOK(t, e, "GetAppByID", "GET", base+"/"+appID, nil).Body
			e.Restart()
			after := appOK(t, e, "GetAppByID after restart", "GET", base+"/"+appID, nil).Body
			if !bytes.Equal(before, after) {
				t.Fatalf("after restart %s; before %s", after, before)
			}
			if !bytes.Equal(appSecretHash(t, e, appID), hasher.Hash(appStr(r.JSON["clientSecret"]))) {
				t.Fatal("secret hash lost across restart")
			}
		})
	})
}
