package e2e

import (
	"encoding/base64"
	"encoding/json"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/gatehouse-id/gatehouse/pkg/testutil"
)

// TestClaimsCachedAndFollowChanges: introspection and userinfo answer
// from the tokens service's cache of users' claims, without a call to
// the directory per request, and a change of the user reaches them within
// a poll of the directory's change feed.
func TestClaimsCachedAndFollowChanges(t *testing.T) {
	d := startDistributed(t, testutil.RedisURL(t))
	_, tok := operatorToken(t, d.edge.base, d.directoryData, d.issuer)
	admin := str(tok["access_token"])

	_, mu := restJSON(t, "POST", d.edge.base+"/management/v1/users/machine", admin, map[string]any{"userName": "reader", "name": "reader"})
	uid := str(mu["userId"])
	_, sec := restJSON(t, "PUT", d.edge.base+"/management/v1/users/"+uid+"/secret", admin, map[string]any{})
	_, proj := restJSON(t, "POST", d.edge.base+"/management/v1/projects", admin, map[string]any{"name": "Claims"})
	_, api := restJSON(t, "POST", d.edge.base+"/management/v1/projects/"+str(proj["id"])+"/apps/api", admin,
		map[string]any{"name": "rs", "authMethodType": "API_AUTH_METHOD_TYPE_BASIC"})
	setColor := func(color string) {
		t.Helper()
		if status, body := restJSON(t, "POST", d.edge.base+"/management/v1/users/"+uid+"/metadata/color", admin,
			map[string]any{"value": base64.StdEncoding.EncodeToString([]byte(color))}); status != 200 {
			t.Fatalf("SetUserMetadata: %d %v", status, body)
		}
	}
	setColor("blue")
	status, minted := postForm(t, d.edge.base+"/oauth/v2/token", url.Values{"grant_type": {"client_credentials"},
		"client_id": {str(sec["clientId"])}, "client_secret": {str(sec["clientSecret"])},
		"scope": {"openid profile urn:gatehouse:iam:user:metadata urn:gatehouse:iam:org:project:id:" + str(proj["id"]) + ":aud"}})
	if status != 200 {
		t.Fatalf("client_credentials: %d %v", status, minted)
	}
	access := str(minted["access_token"])
	apiAuth := "Basic " + base64.StdEncoding.EncodeToString([]byte(url.QueryEscape(str(api["clientId"]))+":"+url.QueryEscape(str(api["clientSecret"]))))
	color := func() string {
		t.Helper()
		res, body := do(t, "POST", d.edge.base+"/oauth/v2/introspect", strings.NewReader(url.Values{"token": {access}}.Encode()),
			map[string]string{"Content-Type": "application/x-www-form-urlencoded", "Authorization": apiAuth})
		var m map[string]any
		_ = json.Unmarshal([]byte(body), &m)
		if res.StatusCode != 200 || m["active"] != true {
			t.Fatalf("introspection: %d %s", res.StatusCode, body)
		}
		md, _ := m["urn:gatehouse:iam:user:metadata"].(map[string]any)
		v, _ := base64.StdEncoding.DecodeString(str(md["color"]))
		return string(v)
	}
	if got := color(); got != "blue" {
		t.Fatalf("introspected metadata color = %q; want blue", got)
	}

	// Warm: twenty introspections and userinfo calls reach the directory
	// not once.
	claimsCalls := func() int {
		n := 0
		for _, l := range d.directory.log.Lines() {
			if strings.HasSuffix(str(l["path"]), "/GetClaims") {
				n++
			}
		}
		return n
	}
	settle := func() { time.Sleep(1500 * time.Millisecond) } // the log is written in batches
	settle()
	before := claimsCalls()
	if before == 0 {
		t.Fatal("no GetClaims call in the directory's log: the test cannot see them")
	}
	for range 20 {
		color()
		if res, body := do(t, "GET", d.edge.base+"/oidc/v1/userinfo", nil, map[string]string{"Authorization": "Bearer " + access}); res.StatusCode != 200 {
			t.Fatalf("userinfo: %d %s", res.StatusCode, body)
		}
	}
	settle()
	if n := claimsCalls() - before; n > 0 {
		t.Errorf("%d GetClaims calls for 40 warm introspection and userinfo requests; want 0", n)
	}

	// A change reaches introspection within a poll of the feed.
	setColor("green")
	changed := time.Now()
	for color() != "green" {
		if time.Since(changed) > 5*time.Second {
			t.Fatal("introspection still shows the old metadata 5 s after the change")
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("a metadata change reached introspection after %v", time.Since(changed).Round(time.Millisecond))
}
