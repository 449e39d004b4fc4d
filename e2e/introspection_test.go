package e2e

import (
	"encoding/json"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gatehouse-id/gatehouse/pkg/config"
)

// TestIntrospectionAndUserinfo: an API app introspects tokens issued for
// its project (and sees others as inactive); userinfo answers per scope.
func TestIntrospectionAndUserinfo(t *testing.T) {
	dir := t.TempDir()
	addr := freeAddr(t)
	issuer := "http://" + addr
	edge := startProc(t, config.RoleEdge, map[string]string{
		"GATEHOUSE_DATA_DIR": dir, "GATEHOUSE_ADDR": addr, "GATEHOUSE_ISSUER": issuer,
		"GATEHOUSE_ADMIN_PASSWORD": "Admin-Passw0rd-for-e2e",
	})
	raw, err := os.ReadFile(filepath.Join(dir, "bootstrap-admin-key.json"))
	if err != nil {
		t.Fatal(err)
	}
	var kf keyFile
	_ = json.Unmarshal(raw, &kf)
	_, tok := postForm(t, edge.base+"/oauth/v2/token", url.Values{
		"grant_type": {"urn:ietf:params:oauth:grant-type:jwt-bearer"},
		"assertion":  {jwtProfileAssertion(t, kf, issuer)},
		"scope":      {"openid profile urn:gatehouse:iam:org:project:id:gatehouse:aud"},
	})
	admin := tok["access_token"].(string)

	_, proj := restJSON(t, "POST", edge.base+"/management/v1/projects", admin, map[string]any{"name": "Reports API"})
	projectID := proj["id"].(string)
	status, app := restJSON(t, "POST", edge.base+"/management/v1/projects/"+projectID+"/apps/api", admin,
		map[string]any{"name": "reports-api", "authMethodType": "API_AUTH_METHOD_TYPE_BASIC"})
	if status != 200 {
		t.Fatalf("AddAPIApp: %d %v", status, app)
	}
	apiID, apiSecret := app["clientId"].(string), app["clientSecret"].(string)

	introspect := func(token, id, secret string) (int, map[string]any) {
		req, _ := http.NewRequest("POST", edge.base+"/oauth/v2/introspect", strings.NewReader(url.Values{"token": {token}}.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.SetBasicAuth(url.QueryEscape(id), url.QueryEscape(secret))
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		var m map[string]any
		_ = json.NewDecoder(res.Body).Decode(&m)
		return res.StatusCode, m
	}
	// The admin token's audience does not include the reports project.
	if status, m := introspect(admin, apiID, apiSecret); status != 200 || m["active"] != false || len(m) != 1 {
		t.Fatalf("foreign-audience token: %d %v; want exactly {active:false}", status, m)
	}
	if status, m := introspect(admin, apiID, "wrong"); status != 401 || m["error"] != "invalid_client" {
		t.Fatalf("bad client secret: %d %v", status, m)
	}

	// A token for the reports project, JWT and opaque.
	for _, typ := range []string{"ACCESS_TOKEN_TYPE_JWT", "ACCESS_TOKEN_TYPE_BEARER"} {
		name := "svc-" + strings.ToLower(typ[len(typ)-3:])
		_, mu := restJSON(t, "POST", edge.base+"/management/v1/users/machine", admin, map[string]any{"userName": name, "name": name, "accessTokenType": typ})
		uid := mu["userId"].(string)
		_, sec := restJSON(t, "PUT", edge.base+"/management/v1/users/"+uid+"/secret", admin, map[string]any{})
		status, cc := postForm(t, edge.base+"/oauth/v2/token", url.Values{
			"grant_type": {"client_credentials"}, "client_id": {sec["clientId"].(string)}, "client_secret": {sec["clientSecret"].(string)},
			"scope": {"openid profile urn:gatehouse:iam:org:project:id:" + projectID + ":aud"},
		})
		if status != 200 {
			t.Fatalf("%s client_credentials: %d %v", typ, status, cc)
		}
		at := cc["access_token"].(string)
		if (strings.Count(at, ".") == 2) != (typ == "ACCESS_TOKEN_TYPE_JWT") {
			t.Fatalf("%s: token format %q", typ, at)
		}
		status, m := introspect(at, apiID, apiSecret)
		if status != 200 || m["active"] != true || m["sub"] != uid || m["token_type"] != "Bearer" || m["iss"] != issuer ||
			m["username"] != name+"@gatehouse.127.0.0.1" || m["client_id"] != sec["clientId"] || m["jti"] == nil {
			t.Fatalf("%s introspection: %d %v", typ, status, m)
		}
		// userinfo with the same token.
		req, _ := http.NewRequest("GET", edge.base+"/oidc/v1/userinfo", nil)
		req.Header.Set("Authorization", "Bearer "+at)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var ui map[string]any
		_ = json.NewDecoder(res.Body).Decode(&ui)
		res.Body.Close()
		if res.StatusCode != 200 || ui["sub"] != uid || ui["name"] != name {
			t.Fatalf("%s userinfo: %d %v", typ, res.StatusCode, ui)
		}
	}
	req, _ := http.NewRequest("GET", edge.base+"/oidc/v1/userinfo", nil)
	req.Header.Set("Authorization", "Bearer not-a-token")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 401 || !strings.Contains(res.Header.Get("WWW-Authenticate"), `error="invalid_token"`) {
		t.Fatalf("userinfo with a bad token: %d %q", res.StatusCode, res.Header.Get("WWW-Authenticate"))
	}
}
