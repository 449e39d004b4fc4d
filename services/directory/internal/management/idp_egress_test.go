package management_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/gatehouse-id/gatehouse/pkg/db"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/mgmttest"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/storetest"
)

// An issuer whose host is an address calls to identity providers may not
// reach (pkg/netguard's policy, from the same variables authn reads) is
// refused when an IdP is added or updated: 400 naming the rule, no event,
// before anything dials it. A host name passes; authn's dialer checks the
// addresses it resolves to.
func TestIDPIssuerAddress(t *testing.T) {
	t.Parallel()
	type row struct {
		issuer string
		rule   string // "" for allowed
	}
	for _, tc := range []struct {
		name string
		env  map[string]string
		rows []row
	}{
		{"default", nil, []row{
			{"https://10.1.2.3/realms/corp", "private"},
			{"https://172.16.0.1", "private"},
			{"https://192.168.1.1:8443", "private"},
			{"https://100.64.0.1", "private"},
			{"https://[fd12::1]", "private"},
			{"https://[::ffff:10.1.2.3]", "private"},
			{"https://100.100.100.200", "a cloud metadata address"},
			{"https://169.254.169.254/latest", "a cloud metadata address"},
			{"https://[fd00:ec2::254]", "a cloud metadata address"},
			{"https://[fe80::1]", "link-local"},
			{"http://127.0.0.1:9000", "loopback"},
			{"http://[::1]:9000", "loopback"},
			{"https://0.0.0.0", "unspecified"},
			{"https://idp.corp.internal", ""},
			{"https://8.8.8.8", ""},
			{"http://localhost:9000", ""},
		}},
		{"allow-listed", map[string]string{
			"GATEHOUSE_IDP_ALLOW": "10.0.0.0/8, 100.64.0.0/10, idp.corp.internal", "GATEHOUSE_IDP_ALLOW_LOOPBACK": "true",
		}, []row{
			{"https://10.1.2.3/realms/corp", ""},
			{"https://100.64.0.1", ""},
			{"http://127.0.0.1:9000", ""},
			{"https://100.100.100.200", "a cloud metadata address"},
			{"https://192.168.1.1", "private"},
		}},
		{"deprecated opt-out", map[string]string{"GATEHOUSE_IDP_DENY_PRIVATE": "false"}, []row{
			{"https://192.168.1.1", ""},
			{"https://[fd12::1]", ""},
			{"https://[fd00:ec2::254]", "a cloud metadata address"},
			{"https://100.100.100.200", "a cloud metadata address"},
			{"http://127.0.0.1:9000", "loopback"},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			storetest.Run(t, func(t *testing.T, d db.Dialect) {
				e := mgmttest.StartEnv(t, d, tc.env)
				r := e.REST("POST", "/management/v1/idps/oidc", e.AdminToken, "", map[string]any{
					"name": "Base", "clientId": "c", "clientSecret": "s", "issuer": "https://idp.example.com"})
				if r.Status != 200 {
					t.Fatalf("add: %d %s", r.Status, r.Body)
				}
				base := idpStr(r.JSON["idpId"])
				for i, row := range tc.rows {
					for _, call := range []struct {
						what, method, path string
						body               map[string]any
					}{
						{"add", "POST", "/management/v1/idps/oidc", map[string]any{
							"name": fmt.Sprintf("idp-%d", i), "clientId": "c", "clientSecret": "s", "issuer": row.issuer}},
						{"update", "PUT", "/management/v1/idps/" + base + "/oidc_config", map[string]any{
							"clientId": "c", "clientSecret": "s", "issuer": row.issuer}},
					} {
						before := e.EventCount()
						r := e.REST(call.method, call.path, e.AdminToken, "", call.body)
						if row.rule == "" {
							if r.Status != 200 {
								t.Errorf("%s with issuer %s: %d %s; want 200", call.what, row.issuer, r.Status, r.Body)
							}
							continue
						}
						msg := idpStr(r.JSON["message"])
						if r.Status != 400 || r.Code() != 3 || !strings.Contains(msg, "issuer names ") || !strings.Contains(msg, "it is "+row.rule) {
							t.Errorf("%s with issuer %s: %d %s; want 400 InvalidArgument naming the rule %q", call.what, row.issuer, r.Status, r.Body, row.rule)
						}
						if after := e.EventCount(); after != before {
							t.Errorf("%s with issuer %s: refused request added %d events", call.what, row.issuer, after-before)
						}
					}
				}
			})
		})
	}
}
