package e2e

import (
	"strings"
	"testing"
)

// TestRESTMalformedRequestsAre400: requests the REST transcoding cannot
// map answer 400 INVALID_ARGUMENT, never 500 (these were the only 5xx in
// ~300k fuzzed requests).
func TestRESTMalformedRequestsAre400(t *testing.T) {
	p, _, c := startCLIServer(t, nil)
	token := strings.TrimSpace(c.ok("token"))
	auth := map[string]string{"Authorization": "Bearer " + token, "Content-Type": "application/json"}
	for _, tc := range []struct{ name, method, path, body string }{
		{"body on GET", "GET", "/management/v1/orgs/me", `{"x":1}`},
		{"body on DELETE", "DELETE", "/management/v1/orgs/me/members/123", `{"x":1}`},
		{"invalid UTF-8 in a path id", "GET", "/management/v1/users/%ff%fe", ""},
		{"invalid UTF-8 in a DELETE path", "DELETE", "/management/v1/idps/%c3%28", ""},
	} {
		res, body := do(t, tc.method, p.base+tc.path, strings.NewReader(tc.body), auth)
		if res.StatusCode != 400 || !strings.Contains(body, `"code":3`) {
			t.Errorf("%s: %d %s; want 400 with code 3 (INVALID_ARGUMENT)", tc.name, res.StatusCode, body)
		}
	}
}

// TestConnectWithoutProtocolHeader: a unary Connect call without the
// optional Connect-Protocol-Version header (connectrpc.com's curl recipe)
// is served, not 404.
func TestConnectWithoutProtocolHeader(t *testing.T) {
	p, _, c := startCLIServer(t, nil)
	token := strings.TrimSpace(c.ok("token"))
	res, body := do(t, "POST", p.base+"/gatehouse.management.v1.ManagementService/GetMyOrg", strings.NewReader("{}"),
		map[string]string{"Authorization": "Bearer " + token, "Content-Type": "application/json"})
	if res.StatusCode != 200 || !strings.Contains(body, `"name":"Gatehouse"`) {
		t.Fatalf("Connect without Connect-Protocol-Version: %d %s", res.StatusCode, body)
	}
}
