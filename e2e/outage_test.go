package e2e

import (
	"encoding/base64"
	"encoding/json"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/gatehouse-id/gatehouse/pkg/config"
	"github.com/gatehouse-id/gatehouse/pkg/testutil"
)

// TestDirectoryOutageTokensKeepServing: with the directory process down,
// known machine users keep getting tokens (client secret and JWT profile)
// from the tokens service's cache, while a machine user removed before the
// outage is never served from it; after the directory is back, everything
// answers as before.
func TestDirectoryOutageTokensKeepServing(t *testing.T) {
	d := startDistributed(t, testutil.RedisURL(t))
	kf, tok := operatorToken(t, d.edge.base, d.directoryData, d.issuer)
	admin := tok["access_token"].(string)

	secret := func(name string) (string, url.Values) {
		_, mu := restJSON(t, "POST", d.edge.base+"/management/v1/users/machine", admin, map[string]any{"userName": name, "name": name})
		uid := str(mu["userId"])
		_, sec := restJSON(t, "PUT", d.edge.base+"/management/v1/users/"+uid+"/secret", admin, map[string]any{})
		return uid, url.Values{"grant_type": {"client_credentials"}, "client_id": {str(sec["clientId"])}, "client_secret": {str(sec["clientSecret"])}}
	}
	_, keeper := secret("keeper")
	doomedID, doomed := secret("doomed")
	// An API app that introspects the keeper's tokens.
	_, proj := restJSON(t, "POST", d.edge.base+"/management/v1/projects", admin, map[string]any{"name": "Outage"})
	_, api := restJSON(t, "POST", d.edge.base+"/management/v1/projects/"+str(proj["id"])+"/apps/api", admin,
		map[string]any{"name": "rs", "authMethodType": "API_AUTH_METHOD_TYPE_BASIC"})
	introspect := func(token string) (int, map[string]any) {
		res, body := do(t, "POST", d.edge.base+"/oauth/v2/introspect", strings.NewReader(url.Values{"token": {token}}.Encode()),
			map[string]string{"Content-Type": "application/x-www-form-urlencoded",
				"Authorization": "Basic " + base64.StdEncoding.EncodeToString([]byte(url.QueryEscape(str(api["clientId"]))+":"+url.QueryEscape(str(api["clientSecret"]))))})
		var m map[string]any
		_ = json.Unmarshal([]byte(body), &m)
		return res.StatusCode, m
	}
	keeperScope := func(v url.Values) url.Values {
		out := url.Values{}
		for k, vs := range v {
			out[k] = vs
		}
		out.Set("scope", "openid profile urn:gatehouse:iam:org:project:id:"+str(proj["id"])+":aud")
		return out
	}
	_, before := postForm(t, d.edge.base+"/oauth/v2/token", keeperScope(keeper))
	if status, body := introspect(str(before["access_token"])); status != 200 || body["active"] != true {
		t.Fatalf("introspection before the outage: %d %v", status, body)
	}
	jwtProfile := func() url.Values {
		return url.Values{"grant_type": {"urn:ietf:params:oauth:grant-type:jwt-bearer"}, "assertion": {jwtProfileAssertion(t, kf, d.issuer)}}
	}
	for name, form := range map[string]url.Values{"keeper": keeper, "doomed": doomed, "JWT profile": jwtProfile()} {
		if status, body := postForm(t, d.edge.base+"/oauth/v2/token", form); status != 200 {
			t.Fatalf("%s before the outage: %d %v", name, status, body)
		}
	}
	if status, body := restJSON(t, "DELETE", d.edge.base+"/management/v1/users/"+doomedID, admin, nil); status != 200 {
		t.Fatalf("RemoveUser: %d %v", status, body)
	}
	// The change reaches tokens within a poll of the feed (1 s).
	time.Sleep(2500 * time.Millisecond)

	dirAddr := strings.TrimPrefix(d.directory.base, "http://")
	d.directory.stop(t)

	for i := range 3 {
		if status, body := postForm(t, d.edge.base+"/oauth/v2/token", keeper); status != 200 {
			t.Fatalf("keeper's client_credentials #%d during the directory outage: %d %v\n%s", i, status, body, d.tokens.log)
		}
		if status, body := postForm(t, d.edge.base+"/oauth/v2/token", jwtProfile()); status != 200 {
			t.Fatalf("JWT profile #%d during the directory outage: %d %v", i, status, body)
		}
	}
	// A resource server keeps introspecting the keeper's tokens, old and new.
	_, during := postForm(t, d.edge.base+"/oauth/v2/token", keeperScope(keeper))
	for _, tk := range []string{str(before["access_token"]), str(during["access_token"])} {
		if status, body := introspect(tk); status != 200 || body["active"] != true || body["username"] == nil {
			t.Fatalf("introspection during the directory outage: %d %v; want active with the user's claims", status, body)
		}
	}
	res, body := do(t, "POST", d.edge.base+"/oauth/v2/token", strings.NewReader(doomed.Encode()),
		map[string]string{"Content-Type": "application/x-www-form-urlencoded"})
	// Known to be gone (the cache read it again after the change) or
	// unavailable; never a token.
	gone := (res.StatusCode == 400 || res.StatusCode == 401) && strings.Contains(body, "invalid_client")
	unavailable := res.StatusCode == 503 && res.Header.Get("Retry-After") != "" && strings.Contains(body, "temporarily_unavailable")
	if !gone && !unavailable {
		t.Fatalf("removed machine user during the outage: %d (Retry-After %q) %s; want invalid_client or 503, never a token",
			res.StatusCode, res.Header.Get("Retry-After"), body)
	}
	if status, body := restJSON(t, "GET", d.edge.base+"/management/v1/orgs/me", admin, nil); status != 503 {
		t.Fatalf("management API with the directory down: %d %v; want 503", status, body)
	}

	start := time.Now()
	d.directory = startProc(t, config.RoleDirectory, d.env(d.directoryData, "GATEHOUSE_ADDR", dirAddr,
		"GATEHOUSE_TOKENS_URL", d.tokens.base))
	for {
		status, body := postForm(t, d.edge.base+"/oauth/v2/token", doomed)
		if body["error"] == "invalid_client" {
			break
		}
		if status == 200 {
			t.Fatalf("removed machine user got a token after the outage: %v", body)
		}
		if time.Since(start) > 30*time.Second {
			t.Fatalf("30 s after the directory restarted: %d %v", status, body)
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("directory restart to first correct answer: %v", time.Since(start).Round(time.Millisecond))
	if status, body := restJSON(t, "GET", d.edge.base+"/management/v1/orgs/me", admin, nil); status != 200 {
		t.Fatalf("management API after the outage: %d %v", status, body)
	}
}

// TestTokensOutageManagementKeepsWorking: the directory verifies JWT
// management tokens itself and follows the revocation list, so a revoked
// token stops working within about a second, and with the tokens service
// down, admins keep working with tokens issued before the outage.
func TestTokensOutageManagementKeepsWorking(t *testing.T) {
	d := startDistributed(t, testutil.RedisURL(t))
	_, tok := operatorToken(t, d.edge.base, d.directoryData, d.issuer)
	admin := tok["access_token"].(string)
	// The directory started before tokens: wait until it follows the list.
	for deadline := time.Now().Add(10 * time.Second); ; {
		_, body := do(t, "GET", d.directory.base+"/readyz", nil, nil)
		if strings.Contains(body, `"revocationList":"in sync"`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("directory /readyz: %s; want the revocation list in sync", body)
		}
		time.Sleep(100 * time.Millisecond)
	}

	// A JWT machine user with a role in the default organization.
	_, mu := restJSON(t, "POST", d.edge.base+"/management/v1/users/machine", admin,
		map[string]any{"userName": "ops", "name": "ops", "accessTokenType": "ACCESS_TOKEN_TYPE_JWT"})
	uid := str(mu["userId"])
	_, sec := restJSON(t, "PUT", d.edge.base+"/management/v1/users/"+uid+"/secret", admin, map[string]any{})
	if status, body := restJSON(t, "POST", d.edge.base+"/management/v1/orgs/me/members", admin, map[string]any{
		"userId": uid, "roles": []string{"ORG_USER_MANAGER"}}); status != 200 {
		t.Fatalf("AddOrgMember: %d %v", status, body)
	}
	form := url.Values{"grant_type": {"client_credentials"}, "client_id": {str(sec["clientId"])}, "client_secret": {str(sec["clientSecret"])},
		"scope": {"urn:gatehouse:iam:org:project:id:gatehouse:aud"}}
	jwtToken := func() string {
		status, body := postForm(t, d.edge.base+"/oauth/v2/token", form)
		at := str(body["access_token"])
		if status != 200 || strings.Count(at, ".") != 2 {
			t.Fatalf("client_credentials: %d %v; want a JWT", status, body)
		}
		return at
	}
	me := func(token string) int {
		status, body := restJSON(t, "GET", d.edge.base+"/management/v1/users/"+uid, token, nil)
		if status != 200 && status != 401 {
			t.Logf("GetUser: %d %v", status, body)
		}
		return status
	}
	revoked, used, unused := jwtToken(), jwtToken(), jwtToken()
	for _, tk := range []string{revoked, used, admin} {
		if s := me(tk); s != 200 {
			t.Fatalf("before: %d", s)
		}
	}

	// Revocation reaches the management API within about a second.
	if status, body := postForm(t, d.edge.base+"/oauth/v2/revoke", url.Values{"token": {revoked},
		"client_id": {str(sec["clientId"])}, "client_secret": {str(sec["clientSecret"])}}); status != 200 {
		t.Fatalf("revoke: %d %v", status, body)
	}
	start := time.Now()
	for me(revoked) != 401 {
		if time.Since(start) > 5*time.Second {
			t.Fatal("a revoked token still works on the management API after 5 s")
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("revocation reached the management API in %v", time.Since(start).Round(time.Millisecond))

	tokensAddr := strings.TrimPrefix(d.tokens.base, "http://")
	d.tokens.stop(t)
	for name, tk := range map[string]string{"used JWT": used, "unused JWT": unused, "used opaque": admin} {
		if s := me(tk); s != 200 {
			t.Errorf("%s with the tokens service down: %d; want 200", name, s)
		}
	}
	if s := me(revoked); s != 401 {
		t.Errorf("revoked JWT with the tokens service down: %d; want 401", s)
	}

	d.tokens = startProc(t, config.RoleTokens, d.env(t.TempDir(), "GATEHOUSE_ADDR", tokensAddr, "GATEHOUSE_DIRECTORY_URL", d.directory.base))
	if s := me(jwtToken()); s != 200 {
		t.Fatalf("after the tokens service is back: %d", s)
	}
}
