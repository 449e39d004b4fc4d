package management_test

import (
	"testing"

	"github.com/gatehouse-id/gatehouse/pkg/db"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/mgmttest"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/storetest"
)

// The login policy's defaultRedirectUri is where a browser is sent after a
// login: https, or http to a loopback host, validated like a redirect URI.
// javascript: and data: (which run in the page), other schemes, http to
// another host, a fragment or credentials are refused and change nothing.
func TestLoginPolicyDefaultRedirect(t *testing.T) {
	storetest.Run(t, func(t *testing.T, d db.Dialect) {
		e := mgmttest.Start(t, d)
		set := func(uri string) int {
			t.Helper()
			return e.REST("POST", "/management/v1/policies/login", e.AdminToken, "", map[string]any{
				"allowUsernamePassword": true, "defaultRedirectUri": uri}).Status
		}
		current := func() string {
			t.Helper()
			r := e.REST("GET", "/management/v1/policies/login", e.AdminToken, "", nil)
			p, _ := r.JSON["policy"].(map[string]any)
			u, _ := p["defaultRedirectUri"].(string)
			return u
		}
		if status := set("https://app.example.com/home"); status != 200 {
			t.Fatalf("https URI: %d", status)
		}
		for _, bad := range []string{"javascript:alert(document.cookie)", "data:text/html,<script>alert(1)</script>",
			"http://app.example.com/", "https:///no-host", "https://app.example.com/#frag", "https://user:pw@app.example.com/",
			"ftp://app.example.com/", "vbscript:msgbox", "https://app.example.com/\u0000"} {
			if status := e.REST("PUT", "/management/v1/policies/login", e.AdminToken, "", map[string]any{
				"allowUsernamePassword": true, "defaultRedirectUri": bad}).Status; status != 400 {
				t.Errorf("defaultRedirectUri %q: %d; want 400", bad, status)
			}
			if got := current(); got != "https://app.example.com/home" {
				t.Fatalf("after refusing %q the policy says %q", bad, got)
			}
		}
		for _, ok := range []string{"http://localhost:3000/", "http://127.0.0.1/cb", "http://[::1]:8080/"} {
			if status := e.REST("PUT", "/management/v1/policies/login", e.AdminToken, "", map[string]any{
				"allowUsernamePassword": true, "defaultRedirectUri": ok}).Status; status != 200 {
				t.Errorf("loopback %q: %d; want 200", ok, status)
			}
		}
	})
}
