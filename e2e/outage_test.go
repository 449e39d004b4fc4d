package e2e

import (
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
