package internalapi_test

import (
	"context"
	"testing"

	"connectrpc.com/connect"

	"github.com/gatehouse-id/gatehouse/pkg/db"
	directoryv1 "github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/directory/v1"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/mgmttest"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/storetest"
)

func TestClientsAndKeys(t *testing.T) {
	storetest.Run(t, func(t *testing.T, d db.Dialect) {
		e := mgmttest.Start(t, d)
		ctx := context.Background()
		c := e.Internal(mgmttest.InternalToken)
		r := e.REST("POST", "/management/v1/projects", e.AdminToken, "", map[string]any{"name": "Shop"})
		if r.Status != 200 {
			t.Fatalf("AddProject: %d %s", r.Status, r.Body)
		}
		projectID := r.JSON["id"].(string)
		r = e.REST("POST", "/management/v1/projects/"+projectID+"/apps/oidc", e.AdminToken, "", map[string]any{
			"name": "web", "redirectUris": []string{"https://shop.example/cb"}, "responseTypes": []string{"OIDC_RESPONSE_TYPE_CODE"},
			"grantTypes": []string{"OIDC_GRANT_TYPE_AUTHORIZATION_CODE", "OIDC_GRANT_TYPE_REFRESH_TOKEN"}, "appType": "OIDC_APP_TYPE_WEB",
			"authMethodType": "OIDC_AUTH_METHOD_TYPE_BASIC", "accessTokenType": "OIDC_TOKEN_TYPE_JWT",
			"postLogoutRedirectUris": []string{"https://shop.example/bye"}, "backChannelLogoutUri": "https://shop.example/backchannel",
		})
		if r.Status != 200 {
			t.Fatalf("AddOIDCApp: %d %s", r.Status, r.Body)
		}
		clientID := r.JSON["clientId"].(string)
		res, err := c.GetClient(ctx, &directoryv1.GetClientRequest{ClientId: clientID})
		if err != nil {
			t.Fatal(err)
		}
		cl := res.GetClient()
		if cl.GetKind() != directoryv1.ClientKind_CLIENT_KIND_OIDC_APP || cl.GetProjectId() != projectID || cl.GetOrgId() != e.OrgID ||
			!cl.GetActive() || cl.GetAuthMethod() != directoryv1.AuthMethod_AUTH_METHOD_CLIENT_SECRET_BASIC ||
			len(cl.GetSecretHash()) != 32 || cl.GetRedirectUris()[0] != "https://shop.example/cb" ||
			cl.GetResponseTypes()[0] != "code" || len(cl.GetGrantTypes()) != 2 || cl.GetAccessTokenType() != directoryv1.TokenType_TOKEN_TYPE_JWT ||
			cl.GetPostLogoutRedirectUris()[0] != "https://shop.example/bye" || cl.GetBackChannelLogoutUri() != "https://shop.example/backchannel" {
			t.Fatalf("OIDC client = %v", cl)
		}

		r = e.REST("POST", "/management/v1/users/machine", e.AdminToken, "", map[string]any{"userName": "svc", "name": "Service"})
		userID := r.JSON["userId"].(string)
		r = e.REST("PUT", "/management/v1/users/"+userID+"/secret", e.AdminToken, "", map[string]any{})
		if r.Status != 200 {
			t.Fatalf("GenerateMachineSecret: %d %s", r.Status, r.Body)
		}
		res, err = c.GetClient(ctx, &directoryv1.GetClientRequest{ClientId: r.JSON["clientId"].(string)})
		if err != nil || res.GetClient().GetKind() != directoryv1.ClientKind_CLIENT_KIND_MACHINE_USER || res.GetClient().GetId() != userID {
			t.Fatalf("machine client %v %v", res, err)
		}
		if _, err := c.GetClient(ctx, &directoryv1.GetClientRequest{ClientId: "nope"}); connect.CodeOf(err) != connect.CodeNotFound {
			t.Fatalf("unknown client: %v", err)
		}

		r = e.REST("POST", "/management/v1/users/"+userID+"/keys", e.AdminToken, "", map[string]any{"type": "KEY_TYPE_JSON"})
		if r.Status != 200 {
			t.Fatalf("AddMachineKey: %d %s", r.Status, r.Body)
		}
		k, err := c.GetMachineKey(ctx, &directoryv1.GetMachineKeyRequest{KeyId: r.JSON["keyId"].(string)})
		if err != nil || k.GetUser().GetId() != userID || !k.GetUser().GetMachine() || k.GetKey().GetExpiresAt() != nil ||
			len(k.GetKey().GetPublicKeyPem()) < 100 {
			t.Fatalf("GetMachineKey %v %v", k, err)
		}
	})
}
